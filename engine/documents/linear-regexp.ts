// The regular expressions of metadata schemas (`pattern`, `patternProperties`), run in time linear
// in the input. JSON Schema patterns are ECMAScript regular expressions, and V8 runs those by
// backtracking: `^(a+)+$` against 34 `a`s and a `!` holds the thread for minutes. Here a pattern is
// parsed as ECMAScript (with the `u` flag, as ajv compiles patterns), written again in RE2 syntax
// with the same meaning, and matched by re2js, an RE2 port whose automata never backtrack. What
// RE2 cannot run in linear time (backreferences, lookahead, lookbehind) is refused, named.

import { RegExpParser, type AST } from '@eslint-community/regexpp';
import { RE2JS } from 're2js';

/** A pattern that is not an ECMAScript regular expression (`invalid`), or that RE2 cannot run (`unsupported`). */
export class PatternError extends Error {
  constructor(
    readonly pattern: string,
    readonly kind: 'invalid' | 'unsupported',
    readonly reason: string,
  ) {
    super(`${JSON.stringify(pattern)} ${kind === 'invalid' ? 'is not an ECMAScript regular expression' : 'cannot run on the linear-time engine (RE2)'}: ${reason}`);
    this.name = 'PatternError';
  }
}

/** A compiled pattern: what ajv calls (`test`), keyed by its text (ajv dedupes patterns by `toString()`). */
export class LinearRegExp {
  constructor(
    readonly source: string,
    private readonly re2: RE2JS,
  ) {}

  /** True when the pattern matches somewhere in `s` (unanchored, as RegExp.prototype.test). */
  test(s: string): boolean {
    return this.re2.test(s);
  }

  toString(): string {
    return `/${this.source}/u`;
  }
}

const parser = new RegExpParser({ ecmaVersion: 2025 });
const MAX_CODE_POINT = 0x10ffff;

type Ranges = ReadonlyArray<readonly [number, number]>;

/** ECMAScript's `\s`: WhiteSpace and LineTerminator (RE2's `\s` is ASCII only). */
const SPACE: Ranges = [[0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a], [0x2028, 0x2029], [0x202f, 0x202f], [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff]];
/** What ECMAScript's `.` does not match without the `s` flag (RE2's `.` leaves out `\n` alone). */
const LINE_TERMINATORS: Ranges = [[0x0a, 0x0a], [0x0d, 0x0d], [0x2028, 0x2029]];
const ASCII: Ranges = [[0, 0x7f]];

/** ECMAScript's long General_Category names → the short ones RE2 knows (both are valid in `\p{…}`). */
const GENERAL_CATEGORY: Record<string, string> = {
  Letter: 'L', Cased_Letter: 'LC', Uppercase_Letter: 'Lu', Lowercase_Letter: 'Ll', Titlecase_Letter: 'Lt', Modifier_Letter: 'Lm', Other_Letter: 'Lo',
  Mark: 'M', Combining_Mark: 'M', Nonspacing_Mark: 'Mn', Spacing_Mark: 'Mc', Enclosing_Mark: 'Me',
  Number: 'N', Decimal_Number: 'Nd', digit: 'Nd', Letter_Number: 'Nl', Other_Number: 'No',
  Punctuation: 'P', punct: 'P', Connector_Punctuation: 'Pc', Dash_Punctuation: 'Pd', Open_Punctuation: 'Ps', Close_Punctuation: 'Pe',
  Initial_Punctuation: 'Pi', Final_Punctuation: 'Pf', Other_Punctuation: 'Po',
  Symbol: 'S', Math_Symbol: 'Sm', Currency_Symbol: 'Sc', Modifier_Symbol: 'Sk', Other_Symbol: 'So',
  Separator: 'Z', Space_Separator: 'Zs', Line_Separator: 'Zl', Paragraph_Separator: 'Zp',
  Other: 'C', Control: 'Cc', cntrl: 'Cc', Format: 'Cf', Surrogate: 'Cs', Private_Use: 'Co', Unassigned: 'Cn',
};

const hex = (c: number) => `\\x{${c.toString(16)}}`;
const rangeText = (ranges: Ranges) => ranges.map(([a, b]) => (a === b ? hex(a) : `${hex(a)}-${hex(b)}`)).join('');

function complement(ranges: Ranges): Ranges {
  const out: [number, number][] = [];
  let next = 0;
  for (const [a, b] of ranges) {
    if (a > next) out.push([next, a - 1]);
    next = b + 1;
  }
  if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT]);
  return out;
}

/** Compiles an ECMAScript pattern (`u` flag) to a linear-time matcher; throws PatternError. */
export function compileLinear(pattern: string): LinearRegExp {
  let ast: AST.Pattern;
  try {
    ast = parser.parsePattern(pattern, 0, pattern.length, { unicode: true });
  } catch (err) {
    throw new PatternError(pattern, 'invalid', (err as Error).message.replace(/^Invalid regular expression: \/.*\/u: /s, ''));
  }
  const source = new Rewriter(pattern).pattern(ast);
  try {
    return new LinearRegExp(pattern, RE2JS.compile(source));
  } catch (err) {
    // What parses as ECMAScript but RE2 refuses: repeat counts above 1000 (nested ones multiplied), an unknown property.
    throw new PatternError(pattern, 'unsupported', (err as Error).message.replace(/^error parsing regexp: /, ''));
  }
}

/** ECMAScript AST → RE2 syntax with the same meaning under the `u` flag (characters as \x{…}). */
class Rewriter {
  constructor(private readonly source: string) {}

  private unsupported(node: AST.Node, what: string): PatternError {
    return new PatternError(this.source, 'unsupported', `${what} (${JSON.stringify(node.raw)} at offset ${node.start}); backreferences, lookahead and lookbehind are refused`);
  }

  pattern(node: AST.Pattern): string {
    return this.alternatives(node.alternatives);
  }

  private alternatives(alternatives: AST.Alternative[]): string {
    return alternatives.map((a) => a.elements.map((e) => this.element(e)).join('')).join('|');
  }

  private element(node: AST.Element): string {
    switch (node.type) {
      case 'Character':
        return hex(node.value);
      case 'CharacterClass':
        return this.characterClass(node);
      case 'CharacterSet':
        return this.characterSet(node, false);
      case 'Group':
        if (node.modifiers) throw this.unsupported(node, 'inline modifiers are not supported');
        return `(?:${this.alternatives(node.alternatives)})`;
      case 'CapturingGroup':
        return `(?:${this.alternatives(node.alternatives)})`;
      case 'Quantifier': {
        const { min, max } = node;
        const count = max === Infinity ? (min === 0 ? '*' : min === 1 ? '+' : `{${min},}`) : min === 0 && max === 1 ? '?' : min === max ? `{${min}}` : `{${min},${max}}`;
        return `${this.element(node.element)}${count}${node.greedy ? '' : '?'}`;
      }
      case 'Assertion':
        switch (node.kind) {
          case 'start':
            return '^'; // without the m flag: the start of the text, in both dialects
          case 'end':
            return '$'; // likewise the end of the text (RE2's $ is \z unless multi-line)
          case 'word':
            return node.negate ? '\\B' : '\\b'; // ASCII word characters in both without the i flag
          case 'lookahead':
            throw this.unsupported(node, 'a lookahead');
          case 'lookbehind':
            throw this.unsupported(node, 'a lookbehind');
        }
        break;
      case 'Backreference':
        throw this.unsupported(node, 'a backreference');
      case 'ExpressionCharacterClass':
        throw this.unsupported(node, 'class set operations need the v flag');
    }
    throw this.unsupported(node, 'an unexpected construct');
  }

  private characterClass(node: AST.CharacterClass): string {
    if (node.elements.length === 0) return node.negate ? `[${rangeText([[0, MAX_CODE_POINT]])}]` : `[^${rangeText([[0, MAX_CODE_POINT]])}]`;
    const parts = node.elements.map((e) => {
      switch (e.type) {
        case 'Character':
          return hex(e.value);
        case 'CharacterClassRange':
          return `${hex(e.min.value)}-${hex(e.max.value)}`;
        case 'CharacterSet':
          return this.characterSet(e, true);
        default:
          throw this.unsupported(e, 'class set operations need the v flag');
      }
    });
    return `[${node.negate ? '^' : ''}${parts.join('')}]`;
  }

  /** A character set on its own (an atom) or inside a class (`inClass`: no brackets of its own). */
  private characterSet(node: AST.CharacterSet, inClass: boolean): string {
    const ranges = (r: Ranges, negate: boolean) => (inClass ? rangeText(negate ? complement(r) : r) : `[${negate ? '^' : ''}${rangeText(r)}]`);
    switch (node.kind) {
      case 'any':
        return ranges(LINE_TERMINATORS, true);
      case 'digit':
        return node.negate ? '\\D' : '\\d'; // [0-9] in both dialects
      case 'word':
        return node.negate ? '\\W' : '\\w'; // [0-9A-Za-z_] in both dialects without the i flag
      case 'space':
        return ranges(SPACE, node.negate);
      case 'property': {
        const p = node.negate ? 'P' : 'p';
        if (node.key === 'General_Category' || node.key === 'gc') return `\\${p}{${GENERAL_CATEGORY[node.value!] ?? node.value}}`;
        if (node.key === 'Script' || node.key === 'sc') return `\\${p}{${node.value}}`; // RE2 knows scripts by their long names
        if (node.value !== null) throw this.unsupported(node, `the property ${node.key} is not supported`);
        if (node.key === 'ASCII') return ranges(ASCII, node.negate);
        return `\\${p}{${node.key}}`; // a binary property: RE2 refuses at compile time the ones it does not know
      }
    }
  }
}
