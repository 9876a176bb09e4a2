// A Leap frame split once into its parts' byte ranges (engine/models/frame-split.ts): each part's
// text must parse to exactly its rows of the whole body, a body the scan does not understand must
// not be split, and a body that is not JSON must fail some part's parse.
import { describe, expect, it } from 'vitest';
import { scanLeapFrame, splitFrame } from '../engine/models/frame-split.js';

function partTexts(body: string, count: number): string[] | undefined {
  const bytes = Buffer.from(body);
  const scan = scanLeapFrame(bytes, bytes.length);
  if (!scan) return undefined;
  return splitFrame(scan, count).map((p) => `{"schema":${bytes.toString('utf8', p.schema[0], p.schema[1])},"rows":[${bytes.toString('utf8', p.rows[0], p.rows[1])}]}`);
}

function tryParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

let seed = 7;
const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
const pick = <T>(xs: T[]) => xs[Math.floor(random() * xs.length)]!;
const STRINGS = ['plain', 'a,b', '[x]', '{y}', 'q"uote', 'back\\slash', 'ü€', '', ' ', '\n', ']', '},{'];
const value = (): unknown => pick([() => random() * 1e6 - 5e5, () => Math.floor(random() * 100), () => pick(STRINGS), () => null, () => true, () => [pick(STRINGS), 1.5, [2]], () => ({ k: pick(STRINGS) })])();
const space = () => pick(['', ' ', '\n  ', '\t']);

function randomFrame(rows: number): { body: string; rows: unknown[][] } {
  const data = Array.from({ length: rows }, () => Array.from({ length: 3 }, value));
  const schema = { fields: [{ name: 'a,]', type: 'double' }, { name: 's', type: 'string' }, { name: 'x', type: { type: 'list', base: 'string' } }] };
  const rowsText = data.map((r) => space() + JSON.stringify(r) + space()).join(',');
  const members = [`${space()}"schema"${space()}:${space()}${JSON.stringify(schema)}`, `${space()}"rows"${space()}:${space()}[${rowsText}]`];
  if (random() < 0.5) members.reverse();
  return { body: `${space()}{${members.join(',')}${space()}}${space()}`, rows: data };
}

describe('frame split', () => {
  it('gives each part exactly its rows of the whole body, in order (randomized)', () => {
    for (let round = 0; round < 300; round++) {
      const { body } = randomFrame(1 + Math.floor(random() * 40));
      const whole = JSON.parse(body) as { schema: unknown; rows: unknown[] };
      const count = 1 + Math.floor(random() * 5);
      const texts = partTexts(body, count);
      expect(texts, body).toBeDefined();
      const parts = texts!.map((t) => JSON.parse(t) as { schema: unknown; rows: unknown[] });
      for (const p of parts) expect(p.schema).toEqual(whole.schema);
      expect(parts.flatMap((p) => p.rows)).toEqual(whole.rows);
      const total = whole.rows.length;
      parts.forEach((p, index) => expect(p.rows.length).toBe(Math.floor((total * (index + 1)) / count) - Math.floor((total * index) / count)));
    }
  });

  it('does not split what it does not understand', () => {
    for (const body of [
      '{"schema":{},"rows":[]}',
      '{"schema":{},"rows":[[1]],"extra":1}',
      '{"schema":{},"schema":{},"rows":[[1]]}',
      '{"sch\\u0065ma":{},"rows":[[1]]}',
      '{"contextFrame":{},"targetFrame":{}}',
      '{"schema":{},"rows":[[1]]} x',
      '[{"schema":{},"rows":[[1]]}]',
      '{"schema":{},"rows":{"a":1}}',
      '{"schema":{},"rows":[[1],,[2]]}',
      '{"schema":{},"rows":[[1] [2]]}',
      '\ufeff{"schema":{},"rows":[[1]]}',
    ]) {
      expect(partTexts(body, 2), body).toBeUndefined();
    }
  });

  it('a body that is not JSON fails some part, whatever is broken (randomized)', () => {
    let split = 0;
    for (let round = 0; round < 400; round++) {
      const { body } = randomFrame(2 + Math.floor(random() * 20));
      const at = Math.floor(random() * body.length);
      const broken = body.slice(0, at) + pick(['"', ']', '[', ',', '}', '{', 'x', ':', '\\']) + body.slice(at + (random() < 0.5 ? 1 : 0));
      if (tryParse(broken) !== undefined) continue;
      const texts = partTexts(broken, 1 + Math.floor(random() * 4));
      if (texts === undefined) continue; // not split: each part parses the whole body and fails
      expect(texts.some((t) => tryParse(t) === undefined), broken).toBe(true);
      split++;
    }
    // Enough of the broken bodies were split for this to say something (87 of 400 with this seed).
    expect(split).toBeGreaterThan(40);
  });
});
