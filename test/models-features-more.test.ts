// Feature transformers beyond the airbnb set: scalers, discretizers, vector maps, interaction,
// text and hashing, checked against hand-computed values (hashing against Spark's documented outputs).

import { describe, expect, it } from 'vitest';
import { compileBundle } from '../engine/models/compile.js';
import { SkippedRow } from '../engine/models/errors.js';
import { dense, sparse } from '../engine/models/types.js';
import { attr, pipelineBundle, type Stage } from './helpers/bundles.js';
import { applyStage, runRow } from './helpers/models.js';


const transformFailure = expect.objectContaining({ kind: 'invalid', code: 'model_transform_failed' });
const bundleFailure = expect.objectContaining({ kind: 'invalid', code: 'model_bundle_invalid' });
const compileStage = (stage: Stage) => compileBundle(pipelineBundle([stage]));

describe('reverse_string_indexer', () => {
  const labels = { labels: attr.strings(['a', 'b', 'c']) };
  it('maps an index back to its label', () => {
    expect(applyStage('reverse_string_indexer', labels, 1)).toBe('b');
    expect(applyStage('reverse_string_indexer', labels, 2)).toBe('c');
  });
  it('fails on an index without a label', () => {
    expect(() => applyStage('reverse_string_indexer', labels, 3)).toThrowError(transformFailure);
    expect(() => applyStage('reverse_string_indexer', labels, -1)).toThrowError(transformFailure);
  });
  it('maps a list of indices when input_shape is a list', () => {
    const attributes = { ...labels, input_shape: attr.dataShape({ base: 'list', isNullable: false }) };
    expect(applyStage('reverse_string_indexer', attributes, [0, 2])).toEqual(['a', 'c']);
  });
});

describe('min_max_scaler', () => {
  const range = { min: attr.tensor([0, 10]), max: attr.tensor([10, 10]) };
  it('rescales to [0, 1]; a constant feature gives the middle', () => {
    expect(applyStage('min_max_scaler', range, dense([5, 3]))).toEqual(dense([0.5, 0.5]));
  });
  it('rescales to [minValue, maxValue] and returns the compressed (sparse) form when mostly zeros', () => {
    const wide = { ...range, minValue: attr.double(-1), maxValue: attr.double(1) };
    expect(applyStage('min_max_scaler', wide, dense([5, 3]))).toEqual(sparse(2, [], []));
    expect(applyStage('min_max_scaler', wide, sparse(2, [0], [10]))).toEqual(dense([1, 0]));
  });
  it('keeps NaN', () => {
    const out = applyStage('min_max_scaler', range, dense([NaN, 1])) as { values: number[] };
    expect(out.values[0]).toBeNaN();
    expect(out.values[1]).toBe(0.5);
  });
});

describe('max_abs_scaler', () => {
  const attributes = { maxAbs: attr.tensor([2, 0]) };
  it('divides by the max absolute value (0 → 1) and clips to [-1, 1]', () => {
    expect(applyStage('max_abs_scaler', attributes, dense([3, -0.5]))).toEqual(dense([1, -0.5]));
    expect(applyStage('max_abs_scaler', attributes, dense([1, 0.25]))).toEqual(dense([0.5, 0.25]));
  });
  it('scales sparse vectors by the divisor of each stored index', () => {
    expect(applyStage('max_abs_scaler', attributes, sparse(2, [1], [-4]))).toEqual(sparse(2, [1], [-1]));
    expect(applyStage('max_abs_scaler', attributes, sparse(2, [0], [1]))).toEqual(sparse(2, [0], [0.5]));
  });
});

describe('binarizer', () => {
  it('scalar: 1 when strictly above the threshold', () => {
    expect(applyStage('binarizer', { threshold: attr.double(0.5) }, 0.5)).toBe(0);
    expect(applyStage('binarizer', { threshold: attr.double(0.5) }, 0.7)).toBe(1);
  });
  it('vector (input_shapes or the older input_shape): element-wise, compressed', () => {
    const four = { threshold: attr.double(0.5), input_shapes: attr.dataShape(attr.tensorShape(4)) };
    expect(applyStage('binarizer', four, dense([0.1, 0.9, 0.6, 0]))).toEqual(dense([0, 1, 1, 0]));
    const six = { threshold: attr.double(0.5), input_shape: attr.dataShape(attr.tensorShape(6)) };
    expect(applyStage('binarizer', six, dense([0, 0, 0, 0, 0.9, 0]))).toEqual(sparse(6, [4], [1]));
    expect(applyStage('binarizer', six, sparse(6, [1, 5], [0.2, 3]))).toEqual(sparse(6, [5], [1]));
  });
});

describe('bucketizer', () => {
  const open = { splits: attr.doubles([null, 0, 10, null]) };
  it('finds the bucket; null ends are infinite', () => {
    expect(applyStage('bucketizer', open, -5)).toBe(0);
    expect(applyStage('bucketizer', open, 0)).toBe(1);
    expect(applyStage('bucketizer', open, 5)).toBe(1);
    expect(applyStage('bucketizer', open, 10)).toBe(2);
    expect(applyStage('bucketizer', open, 1e9)).toBe(2);
  });
  it('puts the last split in the last bucket and fails out of bounds', () => {
    const closed = { splits: attr.doubles([0, 10, 20]) };
    expect(applyStage('bucketizer', closed, 20)).toBe(1);
    expect(() => applyStage('bucketizer', closed, 25)).toThrowError(transformFailure);
    expect(() => applyStage('bucketizer', closed, -1)).toThrowError(transformFailure);
  });
  it('NaN: error by default, extra bucket with keep, row skipped with skip', () => {
    expect(() => applyStage('bucketizer', open, NaN)).toThrowError(transformFailure);
    expect(applyStage('bucketizer', { ...open, handle_invalid: attr.string('keep') }, NaN)).toBe(3);
    expect(() => applyStage('bucketizer', { ...open, handle_invalid: attr.string('skip') }, NaN)).toThrowError(SkippedRow);
  });
  it('refuses splits that do not increase', () => {
    expect(() => compileStage({ name: 'b', op: 'bucketizer', attributes: { splits: attr.doubles([0, 5, 5]) }, inputs: [['input', 'x']], outputs: [['output', 'y']] })).toThrowError(bundleFailure);
  });
});

describe('imputer', () => {
  it('replaces NaN and the missing value with the surrogate', () => {
    const attributes = { surrogate_value: attr.double(7), missing_value: attr.double(23.4), strategy: attr.string('mean') };
    expect(applyStage('imputer', attributes, 23.4)).toBe(7);
    expect(applyStage('imputer', attributes, NaN)).toBe(7);
    expect(applyStage('imputer', attributes, 1)).toBe(1);
  });
  it('without missing_value only NaN is missing', () => {
    const attributes = { surrogate_value: attr.double(7), strategy: attr.string('median') };
    expect(applyStage('imputer', attributes, NaN)).toBe(7);
    expect(applyStage('imputer', attributes, 23.4)).toBe(23.4);
  });
});

describe('normalizer', () => {
  const p = (norm: number | null) => ({ p_norm: attr.double(norm), input_size: attr.int(2) });
  it('divides by the p-norm (1, 2, ∞ written as null, other p)', () => {
    expect(applyStage('normalizer', p(2), dense([3, 4]))).toEqual(dense([0.6, 0.8]));
    expect(applyStage('normalizer', p(1), dense([1, -3]))).toEqual(dense([0.25, -0.75]));
    expect(applyStage('normalizer', p(null), dense([1, -4]))).toEqual(dense([0.25, -1]));
    const cube = applyStage('normalizer', p(3), dense([1, 1])) as { values: number[] };
    expect(cube.values[0]).toBeCloseTo(0.7937005259840998, 15);
  });
  it('leaves a zero vector unchanged and keeps sparse vectors sparse', () => {
    expect(applyStage('normalizer', p(2), dense([0, 0]))).toEqual(dense([0, 0]));
    expect(applyStage('normalizer', { p_norm: attr.double(2) }, sparse(4, [1, 3], [3, 4]))).toEqual(sparse(4, [1, 3], [0.6, 0.8]));
  });
});

describe('pca', () => {
  // 3 features, 2 components; attr.matrix stores the rows column-major as Spark does.
  const attributes = { principal_components: attr.matrix([[1, 2], [3, 4], [5, 6]]) };
  it('projects a dense vector: pcᵀ·x', () => {
    expect(applyStage('pca', attributes, dense([1, 1, 1]))).toEqual(dense([9, 12]));
  });
  it('projects a sparse vector into a dense one', () => {
    expect(applyStage('pca', attributes, sparse(3, [2], [2]))).toEqual(dense([10, 12]));
  });
});

describe('elementwise_product and idf', () => {
  it('multiply element-wise', () => {
    expect(applyStage('elementwise_product', { scaling_vec: attr.tensor([1.3, 3.4]) }, dense([2, 1]))).toEqual(dense([2.6, 3.4]));
    expect(applyStage('idf', { idf: attr.tensor([0.5, 0]) }, sparse(2, [0, 1], [4, 4]))).toEqual(sparse(2, [0, 1], [2, 0]));
    expect(applyStage('idf', { idf: attr.tensor([0.5, 2]) }, dense([4, 4]))).toEqual(dense([2, 8]));
  });
});

describe('interaction', () => {
  const interaction = (numFeatures: number[][], shapes: unknown[]): Stage => ({
    name: 'inter',
    op: 'interaction',
    attributes: {
      num_inputs: attr.int(numFeatures.length),
      input_shapes: attr.dataShapes(shapes),
      ...Object.fromEntries(numFeatures.map((n, i) => [`num_features${i}`, attr.longs(n)])),
    },
    inputs: numFeatures.map((_, i) => [`input${i}`, `x${i}`] as [string, string]),
    outputs: [['output', 'y']],
  });

  it('multiplies numeric features', () => {
    const stage = interaction([[1], [1, 1]], [attr.scalarShape(), attr.tensorShape(2)]);
    expect(runRow(pipelineBundle([stage]), { x0: 2, x1: dense([1, 3]) })).toEqual({ y: dense([2, 6]) });
  });

  it('one-hot encodes a categorical feature (index 2 of 3) before multiplying', () => {
    const stage = interaction([[3], [1, 1]], [attr.scalarShape(), attr.tensorShape(2)]);
    expect(runRow(pipelineBundle([stage]), { x0: 2, x1: dense([1, 3]) })).toEqual({ y: sparse(6, [4, 5], [1, 3]) });
    expect(() => runRow(pipelineBundle([stage]), { x0: 3, x1: dense([1, 3]) })).toThrowError(transformFailure);
  });
});

describe('text', () => {
  it('tokenizer: lowercase, split on each whitespace, trailing empties dropped', () => {
    expect(applyStage('tokenizer', {}, 'Hello  World ')).toEqual(['hello', '', 'world']);
    expect(applyStage('tokenizer', {}, ' a')).toEqual(['', 'a']);
    expect(applyStage('tokenizer', {}, '')).toEqual(['']);
    expect(applyStage('tokenizer', {}, '   ')).toEqual([]);
  });

  it('regex_tokenizer: gaps or matches, minimum length, lowercase', () => {
    const gaps = { regex: attr.string('\\s'), match_gaps: attr.boolean(true), token_min_length: attr.int(2), lowercase_text: attr.boolean(true) };
    expect(applyStage('regex_tokenizer', gaps, 'A bc  Def')).toEqual(['bc', 'def']);
    const words = { regex: attr.string('\\w+'), match_gaps: attr.boolean(false), token_min_length: attr.int(1), lowercase_text: attr.boolean(false) };
    expect(applyStage('regex_tokenizer', words, 'Hi, you!')).toEqual(['Hi', 'you']);
    const grouped = { regex: attr.string('(a)b'), match_gaps: attr.boolean(true), token_min_length: attr.int(1) };
    expect(applyStage('regex_tokenizer', grouped, 'xaby')).toEqual(['x', 'y']);
    // A zero-width match at the start gives no leading empty token (Java's split).
    const camel = { regex: attr.string('(?=[A-Z])'), match_gaps: attr.boolean(true), token_min_length: attr.int(1), lowercase_text: attr.boolean(false) };
    expect(applyStage('regex_tokenizer', camel, 'HelloBigWorld')).toEqual(['Hello', 'Big', 'World']);
  });

  it('ngram: space-joined windows, none when too few tokens', () => {
    expect(applyStage('ngram', { n: attr.long(2) }, ['a', 'b', 'c'])).toEqual(['a b', 'b c']);
    expect(applyStage('ngram', { n: attr.long(2) }, ['a'])).toEqual([]);
    expect(applyStage('ngram', { n: attr.long(2) }, [])).toEqual([]);
  });

  it('stopwords_remover: case-insensitive unless case_sensitive', () => {
    const words = attr.strings(['The', 'a']);
    expect(applyStage('stopwords_remover', { stop_words: words, case_sensitive: {} }, ['the', 'A', 'cat'])).toEqual(['cat']);
    expect(applyStage('stopwords_remover', { stop_words: words, case_sensitive: attr.boolean(true) }, ['the', 'The', 'cat'])).toEqual(['the', 'cat']);
  });

  it('count_vectorizer: counts of vocabulary terms, binary, min_tf as count or fraction', () => {
    const vocabulary = attr.strings(['a', 'b', 'c']);
    const doc = ['a', 'b', 'a', 'd'];
    expect(applyStage('count_vectorizer', { vocabulary, binary: {}, min_tf: attr.double(1) }, doc)).toEqual(sparse(3, [0, 1], [2, 1]));
    expect(applyStage('count_vectorizer', { vocabulary, binary: attr.boolean(true), min_tf: attr.double(1) }, doc)).toEqual(sparse(3, [0, 1], [1, 1]));
    expect(applyStage('count_vectorizer', { vocabulary, binary: {}, min_tf: attr.double(2) }, doc)).toEqual(sparse(3, [0], [2]));
    // 0.5 of 4 tokens = 2
    expect(applyStage('count_vectorizer', { vocabulary, binary: {}, min_tf: attr.double(0.5) }, doc)).toEqual(sparse(3, [0], [2]));
  });
});

describe('hashing_term_frequency', () => {
  it('version 1 (Spark 2, the default) matches Spark 2\'s documented TF-IDF example', () => {
    const v1 = { num_features: attr.long(20), binary: {} };
    expect(applyStage('hashing_term_frequency', v1, ['hi', 'i', 'heard', 'about', 'spark'])).toEqual(sparse(20, [0, 5, 9, 17], [1, 1, 1, 2]));
    expect(applyStage('hashing_term_frequency', v1, ['i', 'wish', 'java', 'could', 'use', 'case', 'classes'])).toEqual(sparse(20, [2, 7, 9, 13, 15], [1, 1, 3, 1, 1]));
    expect(applyStage('hashing_term_frequency', v1, ['logistic', 'regression', 'models', 'are', 'neat'])).toEqual(sparse(20, [4, 6, 13, 15, 18], [1, 1, 1, 1, 1]));
  });

  it('version 2 (Spark 3) matches pyspark\'s documented example', () => {
    const v2 = (n: number) => ({ num_features: attr.long(n), hashUnsafeBytesVersion: attr.int(2) });
    expect(applyStage('hashing_term_frequency', v2(10), ['a', 'b', 'c'])).toEqual(sparse(10, [5, 7, 8], [1, 1, 1]));
    expect(applyStage('hashing_term_frequency', v2(5), ['a', 'b', 'c'])).toEqual(sparse(5, [0, 2, 3], [1, 1, 1]));
    expect(applyStage('hashing_term_frequency', { ...v2(10), binary: attr.boolean(true) }, ['b', 'b', 'b'])).toEqual(sparse(10, [5], [1]));
    expect(applyStage('hashing_term_frequency', v2(10), ['b', 'b', 'b'])).toEqual(sparse(10, [5], [3]));
    expect(applyStage('hashing_term_frequency', v2(10), [])).toEqual(sparse(10, [], []));
  });
});
