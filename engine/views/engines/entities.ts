// Named entities of a text: people, organizations and places from compromise's English
// tagger, organizations also from their names' suffixes (Northwind Traders, Acme Ltd); dates
// from compromise and from exact ISO/numeric patterns; e-mail addresses and phone numbers from
// exact patterns only (patterns.ts). Identifiers (IBANs, payment cards, national id numbers such
// as a US SSN: redaction.ts) are looked for first and are no entity of any kind: nothing inside
// one is a date or a phone number. Phone numbers come before dates the same way, and an
// organization found by its suffix before a person or place the tagger saw in it. Each list is
// deduplicated (case and spacing aside) and in order of first appearance. Precision and recall
// on a labelled set: test/entities.test.ts, docs/workflows.md.

import nlp from 'compromise';
import { findEmails, findNumericDates, findPhones, spansOf, type Span } from './patterns.js';
import { findIdentifiers } from './redaction.js';
import { ENGINES, type EngineInfo } from './versions.js';

export interface Entities {
  people: string[];
  orgs: string[];
  places: string[];
  dates: string[];
  emails: string[];
  phones: string[];
}

/**
 * compromise gives no scores, so the confidence is a fixed prior per source, averaged over the
 * entities found: exact patterns are rarely wrong, a rule-based tagger's people/places/orgs often
 * are (these are assumptions stated here, not measured on each text). With nothing found it is
 * the tagger's prior: nothing found by the tagger is as uncertain as anything found.
 */
const PATTERN_CONFIDENCE = 0.95;
const TAGGER_CONFIDENCE = 0.6;

interface Found extends Span {
  value: string;
  byPattern: boolean;
}

/** Leading and trailing quotes, brackets and punctuation go; a final period stays after a known abbreviation (Inc., Corp., Jr.). */
function trimmed(text: string, start: number): Found | undefined {
  const leading = /^[\s"'“”‘’«»([{<]+/.exec(text)?.[0].length ?? 0;
  let value = text.slice(leading).replace(/(?<![\s"'“”‘’«»)\]}>,;:!?])[\s"'“”‘’«»)\]}>,;:!?]+$/, '');
  if (value.endsWith('.') && !/\b(?:Inc|Corp|Co|Ltd|Jr|Sr|Bros|Dr|St|Mt|[A-Z])\.$/.test(value)) value = value.replace(/(?<!\.)\.+$/, '');
  value = value.replace(/(?<![\s"'“”‘’«»)\]},;:!?])[\s"'“”‘’«»)\]},;:!?]+$/, '');
  if (value === '') return undefined;
  return { start: start + leading, end: start + leading + value.length, value, byPattern: false };
}

function fromTagger(view: { json(options: object): Array<{ text: string; offset: { start: number } }> }): Found[] {
  return view.json({ offset: true, text: true, terms: false }).flatMap((m) => trimmed(m.text, m.offset.start) ?? []);
}

function fromPatterns(text: string, spans: Span[]): Found[] {
  return spans.map((span) => ({ ...span, value: text.slice(span.start, span.end), byPattern: true }));
}

/** In order of first appearance, each value once; a pattern match inside a tagger's (or vice versa) counts once. */
function distinct(found: Found[]): Found[] {
  found.sort((a, b) => a.start - b.start || b.end - b.start - (a.end - a.start));
  const kept: Found[] = [];
  const seen = new Set<string>();
  for (const item of found) {
    const container = kept.find((k) => item.start >= k.start && item.end <= k.end);
    if (container) continue;
    const key = item.value.toLowerCase().replace(/\s+/g, ' ');
    if (seen.has(key)) continue;
    seen.add(key);
    kept.push(item);
  }
  return kept;
}

/** Suffixes that end an organization's name (matched case-sensitively, a final period allowed). */
const ORG_SUFFIXES = [
  'Inc', 'Incorporated', 'Ltd', 'Limited', 'LLC', 'LLP', 'PLC', 'plc', 'GmbH', 'AG', 'KG', 'SE', 'SA', 'S\\.A', 'NV', 'N\\.V', 'BV', 'B\\.V', 'Pty', 'Corp', 'Corporation', 'Co',
  'Company', 'Group', 'Bank', 'Traders', 'Trading', 'Holdings', 'Partners', 'Associates', 'Industries', 'Enterprises', 'Systems',
  'Technologies', 'Solutions', 'Logistics', 'Foundation', 'Institute', 'University', 'Airlines', 'Motors', 'Pharmaceuticals', 'Insurance',
];
/** Words that start a sentence or a phrase before a name, never part of it. */
const NOT_IN_NAME = new Set(['The', 'A', 'An', 'At', 'By', 'For', 'From', 'In', 'On', 'To', 'With', 'Of', 'And', 'Or', 'Mail', 'Email', 'Call', 'Contact', 'Dear', 'Our', 'Their', 'His', 'Her', 'Its', 'This', 'That', 'Yesterday', 'Today', 'Tomorrow', 'Ask', 'Write', 'Pay', 'Paid', 'Joined', 'Visit', 'Since', 'Both', 'When', 'After', 'Before']);
/**
 * One to four capitalized words (or `&`) and a suffix: Northwind Traders, Smith & Wesson Inc., Acme
 * Co. A match starts only where a word does (no letter, digit, apostrophe or hyphen before it):
 * starting inside `Ab-’Ab-’…` at every capital made it quadratic. Exported for test/regex-safety.test.ts.
 */
export const ORG_BY_SUFFIX = new RegExp(`(?<![\\p{L}\\p{N}'’-])(?:(?:\\p{Lu}[\\p{L}\\p{N}'’-]*|&)\\s+){1,4}(?:${ORG_SUFFIXES.join('|')})(?:\\.(?=\\s|$)|(?![\\p{L}\\p{N}]))`, 'u');

function findOrgsBySuffix(text: string): Span[] {
  const spans: Span[] = [];
  for (const span of spansOf(text, ORG_BY_SUFFIX)) {
    let { start } = span;
    // Leading words that are not part of a name (a sentence's first word, a preposition) go.
    for (;;) {
      const word = /^(\S+)\s+/u.exec(text.slice(start, span.end));
      if (!word || !NOT_IN_NAME.has(word[1]!) || start + word[0].length >= span.end) break;
      start += word[0].length;
    }
    // Only a suffix left is no name.
    if (/\s/.test(text.slice(start, span.end).trim())) spans.push({ start, end: span.end });
  }
  return spans;
}

/**
 * A date of the tagger's that is only digits and separators (2024-118, 987-65-4320) is a date
 * only when the exact patterns say so (they are added apart); a year alone stays.
 */
const wordedOrYear = (f: Found) => !/^[\d\s./-]+$/.test(f.value) || /^(?:1[5-9]|20)\d{2}$/.test(f.value);

/** A person without the title before the name (Mr. Thomas Wright: Thomas Wright). */
function withoutTitle(f: Found): Found {
  const title = /^(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Dame)\.?\s+(?=\S)/.exec(f.value);
  return title ? { ...f, start: f.start + title[0].length, value: f.value.slice(title[0].length) } : f;
}

const overlaps = (a: Span, b: Span) => a.start < b.end && b.start < a.end;
/** The items that overlap none of `taken`. */
const outside = (items: Found[], taken: readonly Span[]) => items.filter((item) => !taken.some((t) => overlaps(item, t)));

export function findEntities(text: string): { entities: Entities; engine: EngineInfo; confidence: number } {
  const doc = nlp(text);
  // In order of precedence: what an earlier kind took, a later one does not take again.
  const identifiers = findIdentifiers(text);
  const emails = outside(fromPatterns(text, findEmails(text)), identifiers);
  const phones = outside(fromPatterns(text, findPhones(text)), [...identifiers, ...emails]);
  const exact = [...identifiers, ...emails, ...phones];
  const suffixOrgs = outside(fromPatterns(text, findOrgsBySuffix(text)), exact);
  const orgs = [...suffixOrgs, ...outside(fromTagger(doc.organizations()), [...exact, ...suffixOrgs])];
  const named = [...exact, ...suffixOrgs];
  const found = {
    people: distinct(outside(fromTagger(doc.people()).map(withoutTitle), named)),
    orgs: distinct(orgs),
    places: distinct(outside(fromTagger(doc.places()), named)),
    dates: distinct(outside([...fromTagger(doc.match('#Date+')).filter(wordedOrYear), ...fromPatterns(text, findNumericDates(text))], exact)),
    emails: distinct(emails),
    phones: distinct(phones),
  };
  const all = Object.values(found).flat();
  const confidence = all.length === 0 ? TAGGER_CONFIDENCE : all.reduce((sum, f) => sum + (f.byPattern ? PATTERN_CONFIDENCE : TAGGER_CONFIDENCE), 0) / all.length;
  const values = (list: Found[]) => list.map((f) => f.value);
  return {
    entities: {
      people: values(found.people),
      orgs: values(found.orgs),
      places: values(found.places),
      dates: values(found.dates),
      emails: values(found.emails),
      phones: values(found.phones),
    },
    engine: { ...ENGINES.entities },
    confidence,
  };
}
