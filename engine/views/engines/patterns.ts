// Exact patterns shared by redaction and entity extraction: e-mail addresses, phone numbers,
// numeric and ISO dates. Each finder returns spans of the text (start inclusive, end exclusive).

export interface Span {
  start: number;
  end: number;
}

function* matches(text: string, pattern: RegExp): Generator<RegExpExecArray> {
  const global = new RegExp(pattern.source, pattern.flags.includes('g') ? pattern.flags : pattern.flags + 'g');
  for (let match = global.exec(text); match; match = global.exec(text)) {
    if (match[0] === '') global.lastIndex++;
    else yield match;
  }
}

/** Spans of `pattern`'s matches (or of its group `group`) that `accept` lets through. */
export function spansOf(text: string, pattern: RegExp, accept: (match: RegExpExecArray) => boolean = () => true, group = 0): Span[] {
  const spans: Span[] = [];
  for (const match of matches(text, pattern)) {
    if (!accept(match)) continue;
    const value = match[group];
    if (value === undefined) continue;
    const start = match.index + (group === 0 ? 0 : match[0].indexOf(value));
    spans.push({ start, end: start + value.length });
  }
  return spans;
}

const EMAIL = /(?<![\p{L}\p{N}._%+-])[\p{L}\p{N}._%+-]+@(?:[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?\.)+\p{L}{2,}(?![\p{L}\p{N}-])/u;

export function findEmails(text: string): Span[] {
  return spansOf(text, EMAIL);
}

/** +<country code> and 6..14 more digits in groups: +44 20 7946 0958, +49 (0)30 123456, +1-617-555-0142. */
const INTERNATIONAL_PHONE = /(?<![\w+])\+\d{1,3}(?:[ .-]?\(0\))?(?:[ .-]?\(?\d{1,5}\)?){1,6}(?!\w)/;
/** North American numbers written with separators: (617) 555-0142, 617-555-0142, 617.555.0142, 1 617 555 0142. */
const NORTH_AMERICAN_PHONE = /(?<![\w+(])(?:1[ .-]?)?(?:\(\d{3}\)[ ]?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\w-])/;
/** National numbers with a trunk 0 in space- or dash-separated groups: 020 7946 0958, 030-1234 5678 (9..12 digits: a dd-mm-yyyy date has 8). */
const TRUNK_PHONE = /(?<![\w+./-])0\d{1,4}(?:[ -]\d{2,5}){1,4}(?![\w/.-]?\d)/;

const digitCount = (value: string) => value.replace(/\D/g, '').length;

export function findPhones(text: string): Span[] {
  return [
    ...spansOf(text, INTERNATIONAL_PHONE, (m) => digitCount(m[0]) >= 8 && digitCount(m[0]) <= 15),
    ...spansOf(text, NORTH_AMERICAN_PHONE),
    ...spansOf(text, TRUNK_PHONE, (m) => digitCount(m[0]) >= 9 && digitCount(m[0]) <= 12),
  ].sort((a, b) => a.start - b.start);
}

const MONTHS = 'January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec';
/** 2024-03-05, optionally with a time: 2024-03-05T10:15:00Z. */
const ISO_DATE = /(?<![\w-])\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])(?:[T ](?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?![\w-])/;
/** 05/03/2024, 5.3.24, 03-05-2024: day and month in either order, one separator throughout. */
const NUMERIC_DATE = /(?<![\w./-])(\d{1,2})([./-])(\d{1,2})\2(\d{4}|\d{2})(?![\w/-]|\.\d)/;
/** March 5, 2024 · 5 March 2024 · 5th of Mar. 2024. */
const WRITTEN_DATE = new RegExp(
  `\\b(?:(?:${MONTHS})\\.?\\s+\\d{1,2}(?:st|nd|rd|th)?,?\\s+\\d{4}|\\d{1,2}(?:st|nd|rd|th)?\\s+(?:of\\s+)?(?:${MONTHS})\\.?,?\\s+\\d{4})\\b`,
);

function plausibleDayMonth(match: RegExpExecArray): boolean {
  const a = Number(match[1]);
  const b = Number(match[3]);
  return a >= 1 && b >= 1 && a <= 31 && b <= 31 && (a <= 12 || b <= 12);
}

/** ISO and numeric dates. */
export function findNumericDates(text: string): Span[] {
  return [...spansOf(text, ISO_DATE), ...spansOf(text, NUMERIC_DATE, plausibleDayMonth)].sort((a, b) => a.start - b.start);
}

/** ISO, numeric and written (English month names) dates. */
export function findDates(text: string): Span[] {
  return [...findNumericDates(text), ...spansOf(text, WRITTEN_DATE)].sort((a, b) => a.start - b.start);
}
