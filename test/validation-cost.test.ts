// The bound on a validation's cost (engine/documents/validation-cost.ts) that decides whether the
// validator arms its deadline: what it counts, and where it gives no bound.
import { describe, expect, test } from 'vitest';
import { dataWeight, safeUntimed, schemaFanout } from '../engine/documents/validation-cost.js';

describe('schemaFanout', () => {
  test('counts every subschema once per way it is reached, local $refs expanded, enum values included', () => {
    expect(schemaFanout(true)).toBe(1);
    expect(schemaFanout({ type: 'object', properties: { a: { type: 'string' }, b: { enum: [1, 2, 3] } } })).toBe(1 + 1 + (1 + 3));
    const defs = { $defs: { pair: { properties: { x: {}, y: {} } } } };
    // Three references to a definition of three nodes, under an allOf: 1 + 3 × (1 + 3).
    expect(schemaFanout({ ...defs, allOf: [{ $ref: '#/$defs/pair' }, { $ref: '#/$defs/pair' }, { $ref: '#/$defs/pair' }] })).toBe(1 + 3 * (1 + 3));
    // $defs alone is not applied.
    expect(schemaFanout({ ...defs, type: 'object' })).toBe(1);
    expect(schemaFanout({ items: { prefixItems: [{}, {}], items: {} } })).toBe(1 + 1 + 2 + 1);
  });

  test('has no bound for a recursive schema, a reference it cannot resolve locally, a $dynamicRef, or past its cap', () => {
    expect(schemaFanout({ properties: { child: { $ref: '#' } } })).toBe(Infinity);
    expect(schemaFanout({ $defs: { node: { items: { $ref: '#/$defs/node' } } }, $ref: '#/$defs/node' })).toBe(Infinity);
    expect(schemaFanout({ $ref: 'urn:svc:schema:other@1.0.0' })).toBe(Infinity);
    expect(schemaFanout({ $ref: '#/$defs/missing' })).toBe(Infinity);
    expect(schemaFanout({ $dynamicRef: '#meta' })).toBe(Infinity);
    // Each definition references the one before twice: 2^40 applications.
    const $defs: Record<string, unknown> = { d0: { type: 'string' } };
    for (let i = 1; i <= 40; i++) $defs[`d${i}`] = { allOf: [{ $ref: `#/$defs/d${i - 1}` }, { $ref: `#/$defs/d${i - 1}` }] };
    expect(schemaFanout({ $defs, $ref: '#/$defs/d40' })).toBe(Infinity);
    // Cut short: the root (1) + d21 (1) + its two references (1 each) to d20, a leaf (1 each).
    $defs.d20 = { type: 'string' };
    expect(schemaFanout({ $defs, $ref: '#/$defs/d21' })).toBe(1 + 1 + 2 * (1 + 1));
  });
});

describe('dataWeight and safeUntimed', () => {
  test('weighs nodes, strings and property names, and stops counting past its cap', () => {
    expect(dataWeight(null, 100)).toBe(1);
    expect(dataWeight({ ab: 'xyz', n: [1, 2] }, 100)).toBe(1 + (2 + 1 + 3) + (1 + 1 + 1 + 1));
    expect(dataWeight('x'.repeat(1_000_000), 50)).toBe(51);
  });

  test('runs untimed only what the bound keeps within a fifth of the deadline', () => {
    const entry = { caseNumber: 'CV-2026-00017', court: 'Court 3', parties: ['a', 'b'], filedAt: '2026-12-01' };
    expect(safeUntimed(20, entry, 1000)).toBe(true);
    // 100,000 strings against a schema of 3000 applications: timed.
    expect(safeUntimed(3000, Array.from({ length: 100_000 }, () => 'x'), 1000)).toBe(false);
    // The same small entry under a 10 ms deadline and a schema of 5000 applications: timed.
    expect(safeUntimed(5000, entry, 10)).toBe(false);
    expect(safeUntimed(Infinity, null, 60_000)).toBe(false);
  });
});
