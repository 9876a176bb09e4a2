// Masking personal data in text (profile 'public').
//
// Each finding is replaced by a fixed token naming its kind, `[REDACTED:<kind>]` (kinds below):
// deterministic, it keeps the text readable, and unlike per-character masking it does not give
// away the length of what was removed. Overlapping findings are masked as one, under the kind
// listed first in DETECTORS.
//
// What is found:
// - national-id: US SSN (123-45-6789 or 123 45 6789, the never-issued 000/666/9xx areas, 00
//   groups and 0000 serials excluded); UK National Insurance numbers (AB 12 34 56 C); and any
//   value containing digits right after a label such as "SSN", "social security number",
//   "national ID number", "national insurance number", "passport no.", "tax ID", "TIN", "SIN",
//   "ID number" (so other countries' numbers are caught where the text names them).
// - date-of-birth: the first date (ISO, numeric, or with an English month name; else a year)
//   within 60 characters after "born", "DOB", "D.O.B.", "date of birth", "birth date", "birthday".
// - phone: international (+<country code> ...), North American with separators, national with a
//   trunk 0 (patterns.ts).
// - email: e-mail addresses.
// - address: a house number, one to four capitalized words (or ordinals, "5th") and a street
//   suffix (Street/St, Avenue/Ave, Road/Rd, Lane/Ln, Boulevard/Blvd, Drive/Dr, Court, Place,
//   Square, Terrace, Way, Parkway, Highway, Circle, Close, Crescent, Trail, Row, Mews, Walk,
//   Alley, Plaza, Loop), with an apartment/suite/unit and a ", City, ST 12345" or UK postcode
//   tail when present; P.O. boxes.
// - iban: IBANs (with or without spaces) passing the ISO 13616 mod-97 check.
// - card: 13 to 19 digits, spaces or dashes allowed between them, passing the Luhn check.
// Other dates, names and places are left alone: they are not personal data by themselves here.

import { passesIbanCheck, passesLuhn } from './checksums.js';
import { UnsupportedContent } from './errors.js';
import { findDates, findEmails, findPhones, spansOf, type Span } from './patterns.js';

export const REDACTION_PROFILES: readonly string[] = Object.freeze(['public']);

type Kind = 'iban' | 'card' | 'national-id' | 'email' | 'date-of-birth' | 'address' | 'phone';

const SSN = /(?<![\w-])(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}(?![\w-])/;
const UK_NATIONAL_INSURANCE = /\b(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b/;
const ID_LABEL =
  '(?:SSN|SIN|TIN|NINO|social security (?:number|no\\.?|#)|social insurance (?:number|no\\.?)|national (?:id(?:entity|entification)?|insurance) (?:card )?(?:number|no\\.?|#)?|passport (?:number|no\\.?|#)|tax (?:id(?:entification)?|identification) (?:number|no\\.?|#)?|id(?:entity)? (?:card )?(?:number|no\\.?|#))';
const ID_LABEL_PATTERN = new RegExp(`\\b${ID_LABEL}(?!\\w)`, 'gi');
/**
 * The value right after a label (case-sensitive, unlike the label): an optional letter prefix,
 * then groups of capitals and digits each holding a digit, then an optional single-capital
 * suffix (AB 12 34 56 C); the words that follow the number are not taken.
 */
const LABELLED_VALUE = /\s*(?:(?::|#|is|=)\s*)?((?:[A-Z]{1,3}[ -]?)?\d[A-Z0-9]*(?:[ ./-][A-Z]*\d[A-Z0-9]*){0,5}(?: ?[A-Z](?![\w]))?)(?![\w])/y;

function findLabelledIds(text: string): Span[] {
  const spans: Span[] = [];
  for (const label of spansOf(text, ID_LABEL_PATTERN)) {
    LABELLED_VALUE.lastIndex = label.end;
    const match = LABELLED_VALUE.exec(text);
    if (match?.[1]) {
      const start = label.end + match[0].indexOf(match[1]);
      spans.push({ start, end: start + match[1].length });
    }
  }
  return spans;
}

const BIRTH_LABEL = /(?<![\w.])(?:born|DOB|D\.O\.B\.?|date of birth|birth ?date|birthday)(?![\w])/gi;
const BIRTH_WINDOW = 60;
const YEAR = /(?<!\d)(?:1[89]|20)\d{2}(?!\d)/;

const STREET_SUFFIXES = [
  'Street', 'St', 'Avenue', 'Ave', 'Road', 'Rd', 'Lane', 'Ln', 'Boulevard', 'Blvd', 'Drive', 'Dr', 'Court', 'Ct', 'Place', 'Pl',
  'Square', 'Sq', 'Terrace', 'Ter', 'Way', 'Parkway', 'Pkwy', 'Highway', 'Hwy', 'Circle', 'Cir', 'Close', 'Crescent', 'Cres',
  'Trail', 'Trl', 'Row', 'Mews', 'Walk', 'Alley', 'Plaza', 'Loop',
];
const SUFFIX = `(?:${STREET_SUFFIXES.flatMap((s) => [s, s.toUpperCase()]).join('|')})`;
const STREET_WORD = "(?:[A-Z][A-Za-z'’-]*\\.?|\\d{1,3}(?:st|nd|rd|th))";
const UNIT = '(?:,?\\s+(?:Apt|Apartment|Suite|Ste|Unit|Floor|Fl|Room|Rm)\\.?\\s*#?[A-Za-z0-9-]+|\\s*#\\s?[A-Za-z0-9-]+)';
const CITY_STATE_ZIP = '(?:,\\s*[A-Z][A-Za-z]+(?:\\s[A-Z][A-Za-z]+){0,2},?\\s+[A-Z]{2}\\s+\\d{5}(?:-\\d{4})?)';
const UK_POSTCODE = '(?:,?\\s*(?:[A-Z][A-Za-z]+,?\\s+)?[A-Z]{1,2}\\d[A-Z\\d]?\\s?\\d[A-Z]{2})';
const STREET_ADDRESS = new RegExp(
  `(?<![\\w.,/-])\\d{1,6}[A-Za-z]?(?:-\\d{1,6})?,?\\s+(?:${STREET_WORD}\\s+){1,4}${SUFFIX}\\b\\.?(?:\\s+(?:N|S|E|W|NE|NW|SE|SW)\\b\\.?)?${UNIT}?(?:${CITY_STATE_ZIP}|${UK_POSTCODE})?(?![\\w])`,
);
const PO_BOX = /\bP\.?\s?O\.?\s+Box\s+\d+\b/i;

const IBAN_CANDIDATE = /(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}/;
const CARD_CANDIDATE = /(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w-])/;

/** The longest prefix of an IBAN-shaped match that ends between groups and passes mod-97 (a following capitalized word may have been taken in). */
function findIbans(text: string): Span[] {
  const spans: Span[] = [];
  for (const candidate of spansOf(text, IBAN_CANDIDATE)) {
    const raw = text.slice(candidate.start, candidate.end);
    for (let end = raw.length; end >= 15; end--) {
      const atBoundary = end === raw.length ? !/[A-Za-z0-9]/.test(text[candidate.end] ?? '') : raw[end] === ' ';
      if (!atBoundary || raw[end - 1] === ' ') continue;
      if (passesIbanCheck(raw.slice(0, end).replace(/ /g, ''))) {
        spans.push({ start: candidate.start, end: candidate.start + end });
        break;
      }
    }
  }
  return spans;
}

function findDatesOfBirth(text: string): Span[] {
  const dates = findDates(text);
  const spans: Span[] = [];
  for (const label of spansOf(text, BIRTH_LABEL)) {
    const windowEnd = label.end + BIRTH_WINDOW;
    const date = dates.find((d) => d.start >= label.end && d.start < windowEnd);
    if (date) spans.push(date);
    else {
      const year = spansOf(text.slice(label.end, windowEnd), YEAR)[0];
      if (year) spans.push({ start: label.end + year.start, end: label.end + year.end });
    }
  }
  return spans;
}

/**
 * Identifiers: IBANs (mod-97), payment card numbers (Luhn), national id numbers (US SSN, UK
 * National Insurance, a number after an id label). Entity extraction looks for them first, so
 * that none is taken for a date or a phone number (entities.ts).
 */
export function findIdentifiers(text: string): Span[] {
  return [
    ...findIbans(text),
    ...spansOf(text, CARD_CANDIDATE, (m) => passesLuhn(m[0].replace(/\D/g, ''))),
    ...spansOf(text, SSN),
    ...spansOf(text, UK_NATIONAL_INSURANCE),
    ...findLabelledIds(text),
  ].sort((a, b) => a.start - b.start);
}

const DETECTORS: ReadonlyArray<readonly [Kind, (text: string) => Span[]]> = [
  ['iban', findIbans],
  ['card', (text) => spansOf(text, CARD_CANDIDATE, (m) => passesLuhn(m[0].replace(/\D/g, '')))],
  ['national-id', (text) => [...spansOf(text, SSN), ...spansOf(text, UK_NATIONAL_INSURANCE), ...findLabelledIds(text)]],
  ['email', findEmails],
  ['date-of-birth', findDatesOfBirth],
  ['address', (text) => [...spansOf(text, STREET_ADDRESS), ...spansOf(text, PO_BOX)]],
  ['phone', findPhones],
];

interface Finding extends Span {
  kind: Kind;
  rank: number;
}

/** The findings merged where they overlap, in text order. */
function findPersonalData(text: string): Finding[] {
  const findings = DETECTORS.flatMap(([kind, find], rank) => find(text).map((span) => ({ ...span, kind, rank })));
  findings.sort((a, b) => a.start - b.start || a.rank - b.rank);
  const merged: Finding[] = [];
  for (const finding of findings) {
    const last = merged[merged.length - 1];
    if (last && finding.start < last.end) {
      last.end = Math.max(last.end, finding.end);
      if (finding.rank < last.rank) Object.assign(last, { kind: finding.kind, rank: finding.rank });
    } else merged.push({ ...finding });
  }
  return merged;
}

export function redact(text: string, profile: string): string {
  if (!REDACTION_PROFILES.includes(profile)) {
    throw new UnsupportedContent(`Unknown redaction profile '${profile}' (known: ${REDACTION_PROFILES.join(', ')})`);
  }
  let output = '';
  let position = 0;
  for (const finding of findPersonalData(text)) {
    output += text.slice(position, finding.start) + `[REDACTED:${finding.kind}]`;
    position = finding.end;
  }
  return output + text.slice(position);
}
