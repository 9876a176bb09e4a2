// Text transformers: tokenizer, regex_tokenizer, ngram, stopwords_remover, count_vectorizer, word_filter.

import { bundleError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import { STRING_LIST, list, type Tensor } from '../../types.js';
import type { CompiledStage, OpDefinition } from '../op.js';
import { STRING_INPUT, requireSingleColumn, vectorOutput } from './common.js';

const STRING_LIST_INPUT = list('string', true);

/**
 * Java's `String.split(regex)` with a global `separator`: the text between matches (capture
 * groups are not returned), no leading empty string for a zero-width match at the start,
 * trailing empty strings dropped, and the whole text when nothing matches.
 */
function javaSplit(text: string, separator: RegExp): string[] {
  const parts: string[] = [];
  let index = 0;
  separator.lastIndex = 0;
  for (let m = separator.exec(text); m !== null; m = separator.exec(text)) {
    const start = m.index;
    const end = start + m[0].length;
    if (end === start) separator.lastIndex = start + 1;
    if (index === 0 && start === 0 && end === 0) continue;
    parts.push(text.slice(index, start));
    index = end;
  }
  if (index === 0) return [text];
  parts.push(text.slice(index));
  let kept = parts.length;
  while (kept > 0 && parts[kept - 1] === '') kept--;
  return kept === parts.length ? parts : parts.slice(0, kept);
}

// Java's `\s`: ASCII whitespace only.
const JAVA_WHITESPACE = /[ \t\n\x0B\f\r]/g;

function compileTokenizer(node: NodeSpec): CompiledStage {
  requireSingleColumn(node);
  return {
    inputs: [STRING_INPUT],
    outputs: [STRING_LIST],
    run: (args) => [javaSplit((args[0] as string).toLowerCase(), JAVA_WHITESPACE)],
  };
}

function compileRegexTokenizer(node: NodeSpec): CompiledStage {
  requireSingleColumn(node);
  const source = node.attrs.string('regex', '\\s+');
  const matchGaps = node.attrs.boolean('match_gaps', true);
  const minLength = node.attrs.integer('token_min_length', 1);
  const lowercase = node.attrs.boolean('lowercase_text', true);
  let pattern: RegExp;
  try {
    pattern = new RegExp(source, 'g');
  } catch {
    throw bundleError(`${node.path}: regex "${source}" is not a supported regular expression`);
  }
  return {
    inputs: [STRING_INPUT],
    outputs: [STRING_LIST],
    run(args) {
      const text = lowercase ? (args[0] as string).toLowerCase() : (args[0] as string);
      const tokens = matchGaps ? javaSplit(text, pattern) : (text.match(pattern) ?? []);
      return [tokens.filter((t) => t.length >= minLength)];
    },
  };
}

function compileNgram(node: NodeSpec): CompiledStage {
  requireSingleColumn(node);
  const n = node.attrs.integer('n');
  if (n < 1) throw bundleError(`${node.path}: ngram n must be at least 1`);
  return {
    inputs: [STRING_LIST_INPUT],
    outputs: [STRING_LIST],
    run(args) {
      const tokens = args[0] as string[];
      const grams: string[] = [];
      for (let i = 0; i + n <= tokens.length; i++) grams.push(tokens.slice(i, i + n).join(' '));
      return [grams];
    },
  };
}

function compileStopWordsRemover(node: NodeSpec): CompiledStage {
  requireSingleColumn(node);
  const caseSensitive = node.attrs.boolean('case_sensitive', false);
  const words = node.attrs.strings('stop_words');
  const stop = new Set(caseSensitive ? words : words.map((w) => w.toLowerCase()));
  return {
    inputs: [STRING_LIST_INPUT],
    outputs: [STRING_LIST],
    run: caseSensitive
      ? (args) => [(args[0] as string[]).filter((t) => !stop.has(t))]
      : (args) => [(args[0] as string[]).filter((t) => !stop.has(t.toLowerCase()))],
  };
}

function compileCountVectorizer(node: NodeSpec): CompiledStage {
  requireSingleColumn(node);
  const vocabulary = node.attrs.strings('vocabulary');
  const binary = node.attrs.boolean('binary', false);
  const minTf = node.attrs.double('min_tf', 1);
  const index = new Map<string, number>();
  vocabulary.forEach((term, i) => index.set(term, i));
  const size = index.size;
  return {
    inputs: [STRING_LIST_INPUT],
    outputs: [vectorOutput(size)],
    run(args) {
      const tokens = args[0] as string[];
      const counts = new Map<number, number>();
      for (const token of tokens) {
        const i = index.get(token);
        if (i !== undefined) counts.set(i, (counts.get(i) ?? 0) + 1);
      }
      // min_tf ≥ 1 is a count, below 1 a fraction of the document's tokens.
      const effectiveMinTf = minTf >= 1 ? minTf : tokens.length * minTf;
      const indices = [...counts.keys()].filter((i) => counts.get(i)! >= effectiveMinTf).sort((a, b) => a - b);
      const values = indices.map((i) => (binary ? 1 : counts.get(i)!));
      const out: Tensor = { kind: 'sparse', dims: [size], indices, values };
      return [out];
    },
  };
}

// Java's Character.isLetter on one UTF-16 unit (a lone surrogate is not a letter).
const LETTER = /^\p{L}$/u;

function isWord(token: string, minLength: number): boolean {
  if (token.length <= minLength) return false;
  for (let i = 0; i < token.length; i++) if (!LETTER.test(token[i]!)) return false;
  return true;
}

/** Keeps tokens made only of letters and longer than `length`. */
function compileWordFilter(node: NodeSpec): CompiledStage {
  requireSingleColumn(node);
  const length = node.attrs.integer('length', 3);
  return {
    inputs: [STRING_LIST_INPUT],
    outputs: [STRING_LIST],
    run: (args) => [(args[0] as string[]).filter((t) => isWord(t, length))],
  };
}

export const tokenizer: OpDefinition = { op: 'tokenizer', className: 'Tokenizer', compile: compileTokenizer };
export const regexTokenizer: OpDefinition = { op: 'regex_tokenizer', className: 'RegexTokenizer', compile: compileRegexTokenizer };
export const ngram: OpDefinition = { op: 'ngram', className: 'NGram', compile: compileNgram };
export const stopWordsRemover: OpDefinition = { op: 'stopwords_remover', className: 'StopWordsRemover', compile: compileStopWordsRemover };
export const countVectorizer: OpDefinition = { op: 'count_vectorizer', className: 'CountVectorizer', compile: compileCountVectorizer };
export const wordFilter: OpDefinition = { op: 'word_filter', className: 'WordLengthFilter', compile: compileWordFilter };
