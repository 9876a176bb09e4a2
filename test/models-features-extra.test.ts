// Optional feature ops found in the parity bundles: polynomial_expansion, dct, vector_slicer,
// chi_sq_selector, vector_indexer, word_filter, math_unary, math_binary (hand-computed values).

import { describe, expect, it } from 'vitest';
import { compileBundle } from '../engine/models/compile.js';
import { dense, sparse } from '../engine/models/types.js';
import { attr, pipelineBundle, type Stage } from './helpers/bundles.js';
import { applyStage, runRow } from './helpers/models.js';


const transformFailure = expect.objectContaining({ kind: 'invalid', code: 'model_transform_failed' });
const bundleFailure = expect.objectContaining({ kind: 'invalid', code: 'model_bundle_invalid' });

describe('polynomial_expansion', () => {
  const degree2 = { degree: attr.long(2), input_size: attr.long(2) };
  it('expands (x, y) to Spark\'s order x, x², y, xy, y²', () => {
    expect(applyStage('polynomial_expansion', degree2, dense([2, 3]))).toEqual(dense([2, 4, 3, 6, 9]));
  });
  it('keeps a sparse vector sparse', () => {
    expect(applyStage('polynomial_expansion', degree2, sparse(2, [1], [3]))).toEqual(sparse(5, [2, 4], [3, 9]));
  });
  it('declares C(n + degree, degree) - 1 outputs', () => {
    const stage: Stage = { name: 'p', op: 'polynomial_expansion', attributes: { degree: attr.long(3), input_size: attr.long(3) }, inputs: [['input', 'x']], outputs: [['output', 'y']] };
    expect(compileBundle(pipelineBundle([stage])).outputSchema[1]!.type).toMatchObject({ dims: [19] });
  });
});

describe('dct', () => {
  it('orthonormal forward transform and its inverse', () => {
    const forward = applyStage('dct', { inverse: {}, input_size: attr.int(2) }, dense([1, 1])) as { values: number[] };
    expect(forward.values[0]).toBeCloseTo(Math.SQRT2, 14);
    expect(forward.values[1]).toBeCloseTo(0, 14);
    const back = applyStage('dct', { inverse: attr.boolean(true), input_size: attr.int(2) }, dense([Math.SQRT2, 0])) as { values: number[] };
    expect(back.values[0]).toBeCloseTo(1, 14);
    expect(back.values[1]).toBeCloseTo(1, 14);
  });
});

describe('vector_slicer and chi_sq_selector', () => {
  it('vector_slicer: indices then named indices, in that order', () => {
    const attributes = { indices: attr.longs([2]), names: attr.strings(['a']), named_indices: attr.longs([0]), input_size: attr.int(3) };
    expect(applyStage('vector_slicer', attributes, dense([1, 2, 3]))).toEqual(dense([3, 1]));
    expect(applyStage('vector_slicer', attributes, sparse(3, [0], [5]))).toEqual(sparse(2, [1], [5]));
  });
  it('chi_sq_selector: the selected features in ascending order', () => {
    const attributes = { filter_indices: attr.longs([2, 0]), input_size: attr.int(3) };
    expect(applyStage('chi_sq_selector', attributes, dense([1, 2, 3]))).toEqual(dense([1, 3]));
    expect(applyStage('chi_sq_selector', attributes, sparse(3, [2], [7]))).toEqual(sparse(2, [1], [7]));
  });
  it('refuses an index outside the input', () => {
    const stage: Stage = { name: 's', op: 'chi_sq_selector', attributes: { filter_indices: attr.longs([3]), input_size: attr.int(3) }, inputs: [['input', 'x']], outputs: [['output', 'y']] };
    expect(() => compileBundle(pipelineBundle([stage]))).toThrowError(bundleFailure);
  });
});

describe('vector_indexer', () => {
  const maps = { keys: attr.longs([1]), key_1_keys: attr.doubles([10, 20]), key_1_values: attr.longs([0, 1]), num_features: attr.long(2) };
  it('maps categorical features to their category index', () => {
    expect(applyStage('vector_indexer', maps, dense([5, 20]))).toEqual(dense([5, 1]));
    expect(applyStage('vector_indexer', maps, sparse(2, [1], [10]))).toEqual(sparse(2, [1], [0]));
  });
  it('unseen value: error by default, the extra category with keep', () => {
    expect(() => applyStage('vector_indexer', maps, dense([5, 30]))).toThrowError(transformFailure);
    expect(applyStage('vector_indexer', { ...maps, handle_invalid: attr.string('keep') }, dense([5, 30]))).toEqual(dense([5, 2]));
  });
});

describe('word_filter', () => {
  it('keeps words of letters only, longer than length', () => {
    expect(applyStage('word_filter', { length: attr.int(3) }, ['alice', 'the', 'it,', 'queen', 'ab1cd', 'éclair'])).toEqual(['alice', 'queen', 'éclair']);
  });
});

describe('math_unary and math_binary', () => {
  it('math_unary applies the operation', () => {
    expect(applyStage('math_unary', { operation: attr.string('sqrt') }, 4)).toBe(2);
    expect(applyStage('math_unary', { operation: attr.string('log') }, 1)).toBe(0);
    expect(applyStage('math_unary', { operation: attr.string('exp') }, 0)).toBe(1);
    expect(() => applyStage('math_unary', { operation: attr.string('cbrt') }, 8)).toThrowError(bundleFailure);
  });

  const binary = (operation: string, inputs: [string, string][], extra: Record<string, unknown> = {}): Stage => ({
    name: 'mb', op: 'math_binary', attributes: { operation: attr.string(operation), ...extra }, inputs, outputs: [['output', 'y']],
  });

  it('math_binary on two inputs, or one input and a default', () => {
    expect(runRow(pipelineBundle([binary('sub', [['input_a', 'a'], ['input_b', 'b']])]), { a: 5, b: 3 })).toEqual({ y: 2 });
    expect(runRow(pipelineBundle([binary('pow', [['input_a', 'a']], { db: attr.double(2) })]), { a: 3 })).toEqual({ y: 9 });
    expect(runRow(pipelineBundle([binary('rem', [['input_b', 'b']], { da: attr.double(-7) })]), { b: 3 })).toEqual({ y: -1 });
    expect(runRow(pipelineBundle([binary('log_n', [['input_a', 'a'], ['input_b', 'b']])]), { a: 8, b: 2 }).y).toBeCloseTo(3, 14);
  });
});
