// The two forms a document's metadata is read in (decisions, "Metadata envelope v1.1"): v1, the
// default and unchanged, and v1.1 with each entry's status, pinned schema and receipt. Which
// entry a namespace shows depends on the statuses the reader asked for.

import { type MetadataEntry, type Receipt, metadataIdTime } from './model.js';
import type { Provenance } from './doc-jobs.js';
import type { ValidationIssue } from './validator.js';

export type EntryStatus = 'valid' | 'quarantined' | 'unverified';
export const ENTRY_STATUSES: readonly EntryStatus[] = ['valid', 'quarantined', 'unverified'];
export type EnvelopeVersion = '1' | '1.1';

/** How a reader asked for metadata: the form, and the statuses it shows (default: valid only). */
export interface MetadataReading {
  envelope: EnvelopeVersion;
  statuses: ReadonlySet<EntryStatus>;
}

export const VALID_ONLY: ReadonlySet<EntryStatus> = new Set(['valid']);

/** A derived entry as stored (engine/documents/derived.ts). */
export interface StoredDerived {
  schema: string;
  id: string;
  data: Record<string, unknown>;
  status: EntryStatus;
  issues: ValidationIssue[];
  provenance: Provenance;
  jobId: string;
  actor: string;
  at: number;
  receipt?: Receipt;
}

/** What one namespace holds: its canonical entry and its derived entries by status. */
export interface NamespaceEntries {
  canonical?: MetadataEntry;
  derived: Partial<Record<EntryStatus, StoredDerived>>;
}

type Shown = { mode: 'canonical'; entry: MetadataEntry } | { mode: 'derived'; entry: StoredDerived };

/**
 * The entry a namespace shows: the first of its canonical entry (always valid), its valid derived
 * entry, its quarantined one, its unverified one, whose status the reader asked for.
 */
function chosen(held: NamespaceEntries, statuses: ReadonlySet<EntryStatus>): Shown | undefined {
  if (statuses.has('valid')) {
    if (held.canonical) return { mode: 'canonical', entry: held.canonical };
    if (held.derived.valid) return { mode: 'derived', entry: held.derived.valid };
  }
  for (const status of ['quarantined', 'unverified'] as const) {
    const entry = held.derived[status];
    if (entry && statuses.has(status)) return { mode: 'derived', entry };
  }
  return undefined;
}

function v1Entry(shown: Shown): Record<string, unknown> {
  if (shown.mode === 'canonical') {
    const { schema, id, data } = shown.entry;
    return { schema, id, data, mode: 'canonical' };
  }
  const e = shown.entry;
  return { schema: e.schema, id: e.id, data: e.data, mode: 'derived', status: e.status, provenance: e.provenance, ...(e.issues.length ? { issues: e.issues } : {}) };
}

const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());

function v11Entry(shown: Shown): Record<string, unknown> {
  const e = shown.entry;
  const r = e.receipt;
  // Written before v1.1: what is known is when it was recorded.
  const recordedAt = r?.recordedAt ?? (shown.mode === 'derived' ? shown.entry.at : metadataIdTime(e.id));
  const receipt = {
    receivedAt: iso(r?.receivedAt),
    recordedAt: iso(recordedAt),
    principal: r ? { sub: r.sub, org: r.org } : null,
    requestId: r?.requestId ?? null,
  };
  const base = { id: e.id, mode: shown.mode, status: shown.mode === 'canonical' ? 'valid' : shown.entry.status, schema: { $id: e.schema }, data: e.data, receipt };
  return shown.mode === 'derived' ? { ...base, provenance: shown.entry.provenance } : base;
}

/** GET .../metadata in the reader's form. */
export function bundleAnswer(held: Map<string, NamespaceEntries>, reading: MetadataReading): Record<string, unknown> {
  const namespaces: Record<string, unknown> = {};
  if (reading.envelope === '1.1') {
    for (const [ns, entries] of held) {
      const shown = chosen(entries, reading.statuses);
      if (shown) namespaces[ns] = v11Entry(shown);
    }
    return { envelope: '1.1', namespaces };
  }
  for (const [ns, entries] of held) {
    const shown = chosen(entries, reading.statuses);
    if (shown) namespaces[ns] = v1Entry(shown);
  }
  if (!reading.statuses.has('quarantined')) return { namespaces };
  // v1 with quarantined entries also lists every namespace's quarantined one, where a valid one is in force too.
  const quarantined: Record<string, unknown> = {};
  for (const [ns, entries] of held) if (entries.derived.quarantined) quarantined[ns] = v1Entry({ mode: 'derived', entry: entries.derived.quarantined });
  return { namespaces, quarantined };
}

/** GET .../metadata/{ns} in the reader's form; undefined when the namespace shows nothing. */
export function namespaceAnswer(namespaceUrn: string, held: NamespaceEntries, reading: MetadataReading): Record<string, unknown> | undefined {
  const shown = chosen(held, reading.statuses);
  if (!shown) return undefined;
  return reading.envelope === '1.1' ? { envelope: '1.1', namespaceUrn, entry: v11Entry(shown) } : { namespaceUrn, entry: v1Entry(shown) };
}
