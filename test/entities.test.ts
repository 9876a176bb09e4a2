// Entity extraction (engine/views/engines/entities.ts) measured on a small labelled set made
// here: short texts of the kinds a document holds (letters, invoices, notes, records), each with
// the entities a reader would list. Precision and recall are counted per kind and over all kinds
// (a found value matches an expected one of its kind, case and spacing aside); the thresholds are
// the figures measured when the set was made (docs/workflows.md, "Engines"), so a change that
// makes extraction worse on this set fails here. Identifiers (SSN, IBAN, card numbers) are no
// entity: the set checks that they never come out as dates or phones.
import { describe, expect, test } from 'vitest';
import { findEntities } from '../dist/engine/views/engines/entities.js';

type Kind = 'people' | 'orgs' | 'places' | 'dates' | 'emails' | 'phones';
const KINDS: Kind[] = ['people', 'orgs', 'places', 'dates', 'emails', 'phones'];
type Labels = Partial<Record<Kind, string[]>>;

const SET: Array<[string, Labels]> = [
  ['Maria Keller of Northwind Traders, Chicago. Mail maria.keller@example.org, SSN 123-45-6789.', { people: ['Maria Keller'], orgs: ['Northwind Traders'], places: ['Chicago'], emails: ['maria.keller@example.org'] }],
  ['On March 3, 2024 Jane Smith met the board of Acme Corporation in Boston.', { people: ['Jane Smith'], orgs: ['Acme Corporation'], places: ['Boston'], dates: ['March 3, 2024'] }],
  ['Invoice 2024-118 from Harbour Logistics Ltd, due 2024-05-31. Questions: +44 20 7946 0958.', { orgs: ['Harbour Logistics Ltd'], dates: ['2024-05-31'], phones: ['+44 20 7946 0958'] }],
  ['Please wire the amount to IBAN DE89 3704 0044 0532 0130 00 before 15/06/2024.', { dates: ['15/06/2024'] }],
  ['Card 4111 1111 1111 1111 was charged by Globex Inc. on 2023-11-02.', { orgs: ['Globex Inc.'], dates: ['2023-11-02'] }],
  ['Call Peter Brown at (617) 555-0142 or write to peter.brown@contoso.com.', { people: ['Peter Brown'], phones: ['(617) 555-0142'], emails: ['peter.brown@contoso.com'] }],
  ['The patient, John Miller, SSN 078-05-1120, was admitted in Denver on 04/12/2022.', { people: ['John Miller'], places: ['Denver'], dates: ['04/12/2022'] }],
  ['Siemens AG and Deutsche Bank signed the agreement in Munich.', { orgs: ['Siemens AG', 'Deutsche Bank'], places: ['Munich'] }],
  ['Contact our office in Seattle: 206-555-0199, support@initech.io.', { places: ['Seattle'], phones: ['206-555-0199'], emails: ['support@initech.io'] }],
  ['Emily Clark joined Wayne Enterprises in January 2021.', { people: ['Emily Clark'], orgs: ['Wayne Enterprises'], dates: ['January 2021'] }],
  ['Meeting with Carlos Diaz from Blue Harbor Partners on Friday in Madrid.', { people: ['Carlos Diaz'], orgs: ['Blue Harbor Partners'], places: ['Madrid'], dates: ['Friday'] }],
  ['Policy holder: Anna Novak. National Insurance number AB 12 34 56 C. Renewal 01.09.2025.', { people: ['Anna Novak'], dates: ['01.09.2025'] }],
  ['Umbrella Pharmaceuticals reported results from its lab in Raleigh.', { orgs: ['Umbrella Pharmaceuticals'], places: ['Raleigh'] }],
  ['Send the signed copy to legal@northwind.example by 2025-01-10.', { emails: ['legal@northwind.example'], dates: ['2025-01-10'] }],
  ['David Lee, CFO of Stark Industries, spoke in London on 5 May 2023.', { people: ['David Lee'], orgs: ['Stark Industries'], places: ['London'], dates: ['5 May 2023'] }],
  ['Reference number 987-65-4320 belongs to the claim filed by Laura Chen.', { people: ['Laura Chen'] }],
  ['Tel. 030-1234 5678, Berlin office of Müller GmbH.', { phones: ['030-1234 5678'], places: ['Berlin'], orgs: ['Müller GmbH'] }],
  ['Robert Johnson bought shares of Tesla in New York on 2022-08-19.', { people: ['Robert Johnson'], orgs: ['Tesla'], places: ['New York'], dates: ['2022-08-19'] }],
  ['Lunch with Sarah at the Paris office next Tuesday.', { people: ['Sarah'], places: ['Paris'], dates: ['next Tuesday'] }],
  ['Oceanic Airlines flight delayed; passengers were rebooked in Sydney.', { orgs: ['Oceanic Airlines'], places: ['Sydney'] }],
  ['Account holder Michael Scott, Dunder Mifflin Paper Company, Scranton.', { people: ['Michael Scott'], orgs: ['Dunder Mifflin Paper Company'], places: ['Scranton'] }],
  ['Payment card 5500 0000 0000 0004 expires 12/26; contact billing@globex.com.', { emails: ['billing@globex.com'] }],
  ['Mr. Thomas Wright of Wright & Sons Ltd visited Toronto on June 2, 2021.', { people: ['Thomas Wright'], orgs: ['Wright & Sons Ltd'], places: ['Toronto'], dates: ['June 2, 2021'] }],
  ['The Red Cross Foundation opened a shelter in Houston.', { orgs: ['Red Cross Foundation'], places: ['Houston'] }],
  ['Your SSN 219-09-9999 and phone 415-555-0100 are on file with Pacific Trust Bank.', { phones: ['415-555-0100'], orgs: ['Pacific Trust Bank'] }],
  ['Karen White moved from Dublin to Vienna in 2019.', { people: ['Karen White'], places: ['Dublin', 'Vienna'], dates: ['2019'] }],
];

const norm = (v: string) => v.toLowerCase().replace(/\s+/g, ' ').replace(/\.$/, '').trim();

function measure() {
  const counts = Object.fromEntries(KINDS.map((k) => [k, { tp: 0, found: 0, expected: 0 }])) as Record<Kind, { tp: number; found: number; expected: number }>;
  const misses: string[] = [];
  for (const [text, labels] of SET) {
    const { entities } = findEntities(text);
    for (const kind of KINDS) {
      const expected = new Set((labels[kind] ?? []).map(norm));
      const found = new Set(entities[kind].map(norm));
      const c = counts[kind];
      c.expected += expected.size;
      c.found += found.size;
      for (const v of found) {
        if (expected.has(v)) c.tp++;
        else misses.push(`extra ${kind} "${v}" in: ${text}`);
      }
      for (const v of expected) if (!found.has(v)) misses.push(`missed ${kind} "${v}" in: ${text}`);
    }
  }
  const total = KINDS.reduce((t, k) => ({ tp: t.tp + counts[k].tp, found: t.found + counts[k].found, expected: t.expected + counts[k].expected }), { tp: 0, found: 0, expected: 0 });
  const ratio = (a: number, b: number) => (b === 0 ? 1 : a / b);
  const scores = Object.fromEntries([...KINDS, 'all'].map((k) => {
    const c = k === 'all' ? total : counts[k as Kind];
    return [k, { precision: ratio(c.tp, c.found), recall: ratio(c.tp, c.expected), ...c }];
  })) as Record<Kind | 'all', { precision: number; recall: number; tp: number; found: number; expected: number }>;
  return { scores, misses };
}

describe('entities on a labelled set', () => {
  test('identifiers are never dates or phones', () => {
    for (const text of ['SSN 123-45-6789', 'IBAN DE89 3704 0044 0532 0130 00', 'card 4111 1111 1111 1111', 'NI AB 12 34 56 C']) {
      const { entities } = findEntities(text);
      expect([text, entities.dates, entities.phones]).toEqual([text, [], []]);
    }
  });

  test('organizations by their suffix', () => {
    expect(findEntities('Maria Keller of Northwind Traders, Chicago.').entities.orgs).toEqual(['Northwind Traders']);
    expect(findEntities('Yesterday Acme Ltd. and Initech LLC merged.').entities.orgs).toEqual(['Acme Ltd.', 'Initech LLC']);
  });

  test('precision and recall at least what was measured', () => {
    const { scores, misses } = measure();
    const line = (k: string) => `${k}: precision ${scores[k as Kind].precision.toFixed(2)} (${scores[k as Kind].tp}/${scores[k as Kind].found}), recall ${scores[k as Kind].recall.toFixed(2)} (${scores[k as Kind].tp}/${scores[k as Kind].expected})`;
    console.log([...KINDS, 'all'].map(line).join('\n') + '\n' + misses.join('\n'));
    // Measured on this set (docs/workflows.md): over all kinds precision 0.97 (69/71), recall 0.96
    // (69/72); before the identifier and suffix patterns 0.84 and 0.86, with orgs' recall 0.59,
    // dates' precision 0.68 and phones' 0.71. The thresholds are the figures measured.
    expect(scores.all.precision).toBeGreaterThanOrEqual(69 / 71);
    expect(scores.all.recall).toBeGreaterThanOrEqual(69 / 72);
    expect(scores.orgs.recall).toBeGreaterThanOrEqual(16 / 17);
    expect(scores.dates.precision).toBeGreaterThanOrEqual(13 / 14);
    expect(scores.phones.precision).toBe(1);
    expect(scores.people.precision).toBe(1);
  });
});
