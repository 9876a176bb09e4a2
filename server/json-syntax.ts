// Where a JSON body breaks, for 400 invalid_json's message: "The body is not valid JSON: Expected
// ',' or '}' after property value at line 3, column 3". Node 22's JSON.parse names the line and
// column itself for most errors; its reason is one of V8's fixed phrases and is kept (anything
// else is not). Its "Unexpected token 'x', "<the text>" is not valid JSON" form echoes the body
// and names no place: there a scan of our own finds the place, and the message quotes the one
// character found there, nothing more of the body.

const PREFIX = 'The body is not valid JSON';
/** V8's reasons are short fixed phrases; a message of any other shape is not repeated. */
const SAFE_REASON = /^[A-Za-z ,'{}[\]:-]{1,80}$/;

/** invalid_json's message for `text`, which JSON.parse refused with `err`. */
export function invalidJsonMessage(text: string, err: unknown): string {
  const message = err instanceof Error ? err.message : '';
  const placed = /^(.*?)(?: in JSON)? at position \d+ \(line (\d+) column (\d+)\)$/.exec(message);
  if (placed && SAFE_REASON.test(placed[1]!)) return `${PREFIX}: ${placed[1]} at line ${placed[2]}, column ${placed[3]}`;
  const at = syntaxErrorOffset(text) ?? text.length;
  const { line, column } = lineAndColumn(text, at);
  if (at >= text.length) return `${PREFIX}: it ends early, at line ${line}, column ${column}`;
  const found = String.fromCodePoint(text.codePointAt(at)!);
  return `${PREFIX}: unexpected character ${JSON.stringify(found)} at line ${line}, column ${column}`;
}

/** 1-based line and column (in UTF-16 units, as V8 counts) of `offset`. */
function lineAndColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let start = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) {
    line++;
    start = i + 1;
  }
  return { line, column: offset - start + 1 };
}

const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
const SCALAR = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null/y;

/** `re` (sticky) matched at `at`: the offset after the match, or -1. */
function matchAt(re: RegExp, text: string, at: number): number {
  re.lastIndex = at;
  return re.test(text) ? re.lastIndex : -1;
}

/**
 * The offset of the first character that makes `text` not JSON (text.length: it ends early), or
 * undefined when it is JSON. One pass, no recursion (nesting depth costs no stack).
 */
export function syntaxErrorOffset(text: string): number | undefined {
  const open: string[] = [];
  let i = 0;
  /** What may come next: a value; a key or `}` (after `{`); a key; a value or `]` (after `[`); what follows a value. */
  let want: 'value' | 'firstKey' | 'key' | 'firstValue' | 'after' = 'value';
  for (;;) {
    while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
    const c = text[i];
    if (want === 'after') {
      const top = open[open.length - 1];
      if (top === undefined) return c === undefined ? undefined : i;
      if (c === ',') {
        want = top === '{' ? 'key' : 'value';
      } else if ((c === '}' && top === '{') || (c === ']' && top === '[')) {
        open.pop();
      } else {
        return i;
      }
      i++;
      continue;
    }
    if (c === undefined) return i;
    if ((want === 'firstKey' && c === '}') || (want === 'firstValue' && c === ']')) {
      open.pop();
      i++;
      want = 'after';
      continue;
    }
    if (want === 'firstKey' || want === 'key') {
      const end = matchAt(STRING, text, i);
      if (end < 0) return i;
      i = end;
      while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
      if (text[i] !== ':') return i;
      i++;
      want = 'value';
      continue;
    }
    if (c === '{' || c === '[') {
      open.push(c);
      i++;
      want = c === '{' ? 'firstKey' : 'firstValue';
      continue;
    }
    const end = matchAt(c === '"' ? STRING : SCALAR, text, i);
    if (end < 0) return i;
    i = end;
    want = 'after';
  }
}
