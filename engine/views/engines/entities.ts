// Named entities of a text: people, organizations and places from compromise's English
// tagger; dates from compromise and from exact ISO/numeric patterns; e-mail addresses and phone
// numbers from exact patterns only (patterns.ts). Each list is deduplicated (case and spacing
// aside) and in order of first appearance.

import nlp from 'compromise';
import { findEmails, findNumericDates, findPhones, type Span } from './patterns.js';
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

export function findEntities(text: string): { entities: Entities; engine: EngineInfo; confidence: number } {
  const doc = nlp(text);
  const found = {
    people: distinct(fromTagger(doc.people())),
    orgs: distinct(fromTagger(doc.organizations())),
    places: distinct(fromTagger(doc.places())),
    dates: distinct([...fromTagger(doc.match('#Date+')), ...fromPatterns(text, findNumericDates(text))]),
    emails: distinct(fromPatterns(text, findEmails(text))),
    phones: distinct(fromPatterns(text, findPhones(text))),
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
