import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { compileBundle, type GraphStage } from '../engine/models/compile.js';
import { pipelineLayers, renderGraphSvg } from '../engine/models/graph-svg.js';
import { opDefinition } from '../engine/models/stages/index.js';
import { scalar, tensor, type DataType } from '../engine/models/types.js';
import { attr, pipelineBundle, type Stage } from './helpers/bundles.js';
import { pythonHas } from './helpers/python.js';

// ---- A strict XML well-formedness checker (no parser is among the dependencies) ----

interface XmlElement {
  name: string;
  attributes: Record<string, string>;
  children: XmlElement[];
  /** Decoded character data directly inside this element. */
  text: string;
}

const NAME = /^[A-Za-z_:][A-Za-z0-9_:.-]*/;
const PREDEFINED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

function decodeReferences(raw: string, where: string): string {
  return raw.replace(/&([^;&<]*);?/g, (whole, ref: string) => {
    if (!whole.endsWith(';')) throw new Error(`bare & in ${where}`);
    if (ref in PREDEFINED) return PREDEFINED[ref]!;
    const m = /^#(?:x([0-9A-Fa-f]+)|([0-9]+))$/.exec(ref);
    if (!m) throw new Error(`unknown entity &${ref}; in ${where}`);
    return String.fromCodePoint(m[1] ? parseInt(m[1], 16) : Number(m[2]));
  });
}

function checkChars(raw: string): void {
  if (/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u.test(raw)) throw new Error('character not allowed in XML');
}

/** Parses a document or throws: one root, balanced tags, quoted unique attributes, valid references. */
function parseXml(doc: string): XmlElement {
  checkChars(doc);
  let i = 0;
  const skipMisc = () => {
    for (;;) {
      const ws = /^\s*/.exec(doc.slice(i))![0];
      i += ws.length;
      if (doc.startsWith('<!--', i)) {
        const end = doc.indexOf('-->', i + 4);
        if (end < 0 || doc.slice(i + 4, end).includes('--')) throw new Error('bad comment');
        i = end + 3;
      } else if (doc.startsWith('<?', i) && !doc.startsWith('<?xml', i)) {
        const end = doc.indexOf('?>', i);
        if (end < 0) throw new Error('unterminated processing instruction');
        i = end + 2;
      } else return;
    }
  };
  if (doc.startsWith('<?xml')) {
    const end = doc.indexOf('?>');
    if (!/^<\?xml version="1\.[0-9]"( encoding="[A-Za-z][A-Za-z0-9._-]*")?( standalone="(yes|no)")?\s*\?>$/.test(doc.slice(0, end + 2))) {
      throw new Error('bad XML declaration');
    }
    i = end + 2;
  }
  skipMisc();
  const root = element();
  skipMisc();
  if (i !== doc.length) throw new Error(`content after the root element at ${i}`);
  return root;

  function element(): XmlElement {
    if (doc[i] !== '<') throw new Error(`expected an element at ${i}`);
    i++;
    const name = NAME.exec(doc.slice(i))?.[0];
    if (!name) throw new Error(`bad element name at ${i}`);
    i += name.length;
    const el: XmlElement = { name, attributes: {}, children: [], text: '' };
    for (;;) {
      const ws = /^\s*/.exec(doc.slice(i))![0];
      i += ws.length;
      if (doc.startsWith('/>', i)) {
        i += 2;
        return el;
      }
      if (doc[i] === '>') {
        i++;
        break;
      }
      if (ws.length === 0) throw new Error(`attributes must be separated by white space at ${i}`);
      const attrName = NAME.exec(doc.slice(i))?.[0];
      if (!attrName) throw new Error(`bad attribute name at ${i}`);
      i += attrName.length;
      const m = /^\s*=\s*(["'])/.exec(doc.slice(i));
      if (!m) throw new Error(`attribute ${attrName} lacks a quoted value`);
      i += m[0].length;
      const end = doc.indexOf(m[1]!, i);
      if (end < 0) throw new Error('unterminated attribute value');
      const raw = doc.slice(i, end);
      if (raw.includes('<')) throw new Error(`< in attribute ${attrName}`);
      if (attrName in el.attributes) throw new Error(`duplicate attribute ${attrName}`);
      el.attributes[attrName] = decodeReferences(raw, `attribute ${attrName}`);
      i = end + 1;
    }
    for (;;) {
      const next = doc.indexOf('<', i);
      if (next < 0) throw new Error(`unclosed element ${name}`);
      const raw = doc.slice(i, next);
      if (raw.includes(']]>')) throw new Error(']]> in text');
      el.text += decodeReferences(raw, `text of ${name}`);
      i = next;
      if (doc.startsWith('</', i)) {
        const close = /^<\/([A-Za-z_:][A-Za-z0-9_:.-]*)\s*>/.exec(doc.slice(i));
        if (!close || close[1] !== name) throw new Error(`mismatched end tag at ${i}, open element ${name}`);
        i += close[0].length;
        return el;
      }
      if (doc.startsWith('<!--', i)) {
        const end = doc.indexOf('-->', i + 4);
        if (end < 0) throw new Error('bad comment');
        i = end + 3;
        continue;
      }
      el.children.push(element());
    }
  }
}

function all(el: XmlElement, name: string): XmlElement[] {
  const found = el.name === name ? [el] : [];
  return found.concat(...el.children.map((c) => all(c, name)));
}

/** Parses with expat (Python's standard library) when present: an independent, real XML parser. */
function expatParses(svg: string): boolean {
  execFileSync('python3', ['-c', 'import sys, xml.dom.minidom; xml.dom.minidom.parseString(sys.stdin.buffer.read())'], {
    input: svg,
  });
  return true;
}

// ---- Graphs built by hand ----

const field = (name: string, type: DataType) => ({ name, type });
const leaf = (className: string, name: string, inputs: ReturnType<typeof field>[], outputs: ReturnType<typeof field>[]): GraphStage => ({
  className,
  name,
  op: className.toLowerCase(),
  inputs,
  outputs,
});
const pipeline = (name: string, children: GraphStage[]): GraphStage => {
  const produced = new Set(children.flatMap((c) => c.outputs.map((f) => f.name)));
  return {
    className: 'Pipeline',
    name,
    op: 'pipeline',
    inputs: children.flatMap((c) => c.inputs).filter((f) => !produced.has(f.name)),
    outputs: children.flatMap((c) => c.outputs),
    children,
  };
};

const stringIn = scalar('string', true);
const indexer = leaf('StringIndexer', 'string_indexer_state', [field('state', stringIn)], [field('state_index', scalar('double'))]);
const oneHot = leaf('OneHotEncoder', 'one_hot_state', [field('state_index', scalar('double', true))], [field('state_oh', tensor('double', [50]))]);
const scaler = leaf('StandardScaler', 'scaler_price', [field('price', tensor('double', [1], true))], [field('price_scaled', tensor('double', [1]))]);
const assembler = leaf(
  'VectorAssembler',
  'assembler',
  [field('state_oh', tensor('double', [50])), field('price_scaled', tensor('double', [1]))],
  [field('features', tensor('double', [51]))],
);
const regression = leaf('LinearRegressionModel', 'linear_regression', [field('features', tensor('double', [51], true))], [field('prediction', scalar('double'))]);
const features = pipeline('features_pipeline', [indexer, oneHot, scaler]);
const model = pipeline('pipeline_ed5135e9ca49', [features, assembler, regression]);

const titles = (doc: XmlElement) => all(doc, 'g').filter((g) => g.attributes.class === 'stage').map((g) => all(g, 'title')[0]!.text);
const stageGroup = (doc: XmlElement, title: string) =>
  all(doc, 'g').find((g) => g.attributes.class === 'stage' && all(g, 'title')[0]!.text === title)!;
const rowTexts = (group: XmlElement) => all(group, 'text').slice(1).map((t) => t.text);
const rowClasses = (group: XmlElement) => all(group, 'rect').map((r) => r.attributes.class).filter(Boolean);
const viewBox = (doc: XmlElement) => doc.attributes.viewBox!.split(' ').map(Number);
const texts = (doc: XmlElement) => all(doc, 'text').map((t) => t.text);

describe('renderGraphSvg', () => {
  const svg = renderGraphSvg(model, {});
  const doc = parseXml(svg);

  it('is a well-formed, self-contained SVG document', () => {
    expect(svg.startsWith('<?xml version="1.0" encoding="UTF-8"')).toBe(true);
    expect(doc.name).toBe('svg');
    expect(doc.attributes.xmlns).toBe('http://www.w3.org/2000/svg');
    expect(Number(doc.attributes.width)).toBeGreaterThan(0);
    expect(Number(doc.attributes.height)).toBeGreaterThan(0);
    expect(viewBox(doc)).toHaveLength(4);
    // Nothing fetched from elsewhere: no external references, no scripts.
    expect(svg).not.toMatch(/href=|<script|<image|@import/);
  });

  it.skipIf(!pythonHas('xml.dom.minidom'))('parses with expat (python3 skipped when absent)', () => {
    expect(expatParses(svg)).toBe(true);
    expect(expatParses(renderGraphSvg(model, { uniqueSchemas: false, elideParentSchema: false }))).toBe(true);
  });

  it('the strict checker used here rejects malformed XML', () => {
    expect(() => parseXml('<a><b></a></b>')).toThrow();
    expect(() => parseXml('<a x="1" x="2"/>')).toThrow();
    expect(() => parseXml('<a>x & y</a>')).toThrow();
    expect(() => parseXml('<a title="<"/>')).toThrow();
    expect(() => parseXml('<a/><b/>')).toThrow();
    expect(() => parseXml('<a>\u0001</a>')).toThrow();
    expect(parseXml('<a t="&lt;&#x26;">&amp;&#65;</a>')).toMatchObject({ attributes: { t: '<&' }, text: '&A' });
  });

  it('draws a Root node and a box titled "<className>: <name>" for every stage', () => {
    expect(titles(doc)).toEqual([
      'Root',
      'Pipeline: pipeline_ed5135e9ca49',
      'Pipeline: features_pipeline',
      'StringIndexer: string_indexer_state',
      'StandardScaler: scaler_price',
      'OneHotEncoder: one_hot_state',
      'VectorAssembler: assembler',
      'LinearRegressionModel: linear_regression',
    ]);
  });

  it('shows one row per field as "name: type", outputs highlighted', () => {
    const box = stageGroup(doc, 'VectorAssembler: assembler');
    expect(rowTexts(box)).toEqual(['state_oh: tensor(double, [50])', 'price_scaled: tensor(double, [1])', 'features: tensor(double, [51])']);
    expect(rowClasses(box)).toEqual(['field input', 'field input', 'field output']);
    const fills = all(box, 'rect').filter((r) => r.attributes.class).map((r) => r.attributes.fill);
    expect(fills[2]).not.toBe(fills[0]);
    expect(rowTexts(stageGroup(doc, 'StringIndexer: string_indexer_state'))).toEqual(['state: string', 'state_index: double']);
  });

  it('groups stages whose inputs no remaining stage produces into one Par layer, then the rest', () => {
    expect(pipelineLayers([indexer, oneHot, scaler]).map((l) => l.map((s) => s.name))).toEqual([
      ['string_indexer_state', 'scaler_price'],
      ['one_hot_state'],
    ]);
    expect(pipelineLayers(model.children!).map((l) => l.map((s) => s.name))).toEqual([
      ['features_pipeline'],
      ['assembler'],
      ['linear_regression'],
    ]);
    expect(pipelineLayers([])).toEqual([]);
    // Exactly one layer with several stages, so one Par frame; its members sit side by side.
    expect(texts(doc).filter((t) => t === 'Par')).toHaveLength(1);
    const y = (title: string) => Number(all(stageGroup(doc, title), 'rect')[0]!.attributes.y);
    const x = (title: string) => Number(all(stageGroup(doc, title), 'rect')[0]!.attributes.x);
    expect(y('StringIndexer: string_indexer_state')).toBe(y('StandardScaler: scaler_price'));
    expect(x('StringIndexer: string_indexer_state')).toBeLessThan(x('StandardScaler: scaler_price'));
    expect(y('OneHotEncoder: one_hot_state')).toBeGreaterThan(y('StandardScaler: scaler_price'));
    expect(y('LinearRegressionModel: linear_regression')).toBeGreaterThan(y('VectorAssembler: assembler'));
  });

  it('links consecutive layers with arrows labelled next', () => {
    // Root→model; model box→features→assembler→regression; features box→Par→one-hot.
    expect(texts(doc).filter((t) => t === 'next')).toHaveLength(6);
    expect(all(doc, 'line').filter((l) => l.attributes.class === 'next')).toHaveLength(6);
  });

  it('elide-parent-schema hides only a pipeline\'s own inputs', () => {
    const pipelineRows = (d: XmlElement) => rowClasses(stageGroup(d, 'Pipeline: features_pipeline'));
    expect(pipelineRows(doc)).toEqual(['field output', 'field output', 'field output']);
    const shown = parseXml(renderGraphSvg(model, { elideParentSchema: false }));
    expect(pipelineRows(shown)).toEqual(['field input', 'field input', 'field output', 'field output', 'field output']);
    expect(rowTexts(stageGroup(shown, 'Pipeline: features_pipeline')).slice(0, 2)).toEqual(['state: string', 'price: tensor(double, [1])']);
    // Leaf stages keep their inputs either way.
    expect(rowClasses(stageGroup(doc, 'StringIndexer: string_indexer_state'))).toEqual(['field input', 'field output']);
  });

  it('unique-schemas=false links each column from its producer to its consumers', () => {
    expect(all(doc, 'path').filter((p) => p.attributes.class === 'column')).toHaveLength(0);
    const linked = parseXml(renderGraphSvg(model, { uniqueSchemas: false }));
    const links = all(linked, 'path').filter((p) => p.attributes.class === 'column');
    expect(links.map((p) => all(p, 'title')[0]!.text).sort()).toEqual(['features', 'price_scaled', 'state_index', 'state_oh']);
    expect(Number(linked.attributes.width)).toBeGreaterThan(Number(doc.attributes.width));
  });

  it('density sets pixels per inch of the same drawing', () => {
    const dense = parseXml(renderGraphSvg(model, { density: 100 }));
    expect(viewBox(dense)).toEqual(viewBox(doc));
    // 72 viewBox units per inch: width in pixels = ceil(units / 72 * density).
    expect(Number(doc.attributes.width)).toBe(Math.ceil((viewBox(doc)[2]! / 72) * 50));
    expect(Number(dense.attributes.width)).toBe(Math.ceil((viewBox(doc)[2]! / 72) * 100));
    expect(Number(dense.attributes.height)).toBe(Math.ceil((viewBox(doc)[3]! / 72) * 100));
  });

  it('vertical-spacing is the gap between layers, in inches', () => {
    const spaced = parseXml(renderGraphSvg(model, { verticalSpacing: 1 }));
    // Six gaps stacked top to bottom, each 0.5 inch (36 units) wider.
    expect(viewBox(spaced)[3]! - viewBox(doc)[3]!).toBeCloseTo(6 * 36, 6);
    expect(viewBox(spaced)[2]).toBe(viewBox(doc)[2]);
  });

  it('escapes names and fields for XML, and drops characters XML cannot carry', () => {
    const odd = 'a<b & "c"> \'d\'';
    const weird = leaf('Str<ange>', odd, [field('x<&y', stringIn)], [field('out"\u0001', scalar('double'))]);
    const out = renderGraphSvg(pipeline('p&q', [weird]), { uniqueSchemas: false, elideParentSchema: false });
    expect(out).not.toContain(odd);
    expect(out).not.toContain('\u0001');
    const parsed = parseXml(out);
    expect(parsed.children.find((c) => c.name === 'title')!.text).toBe('Pipeline: p&q');
    const box = stageGroup(parsed, `Str<ange>: ${odd}`);
    expect(rowTexts(box)).toEqual(['x<&y: string', 'out"\uFFFD: double']);
    if (pythonHas('xml.dom.minidom')) expect(expatParses(out)).toBe(true);
  });

  it('draws a bundle whose root is a single stage, and an empty pipeline', () => {
    expect(titles(parseXml(renderGraphSvg(indexer)))).toEqual(['Root', 'StringIndexer: string_indexer_state']);
    expect(titles(parseXml(renderGraphSvg(pipeline('empty', []))))).toEqual(['Root', 'Pipeline: empty']);
  });

  it('rejects densities and spacings that make no drawing', () => {
    const queryFailure = expect.objectContaining({ kind: 'invalid', code: 'model_query_invalid' });
    expect(() => renderGraphSvg(model, { density: 0 })).toThrowError(queryFailure);
    expect(() => renderGraphSvg(model, { density: Number.NaN })).toThrowError(queryFailure);
    expect(() => renderGraphSvg(model, { verticalSpacing: -1 })).toThrowError(queryFailure);
    expect(() => renderGraphSvg(model, { verticalSpacing: Number.POSITIVE_INFINITY })).toThrowError(queryFailure);
  });
});

describe('renderGraphSvg of compiled bundles', () => {
  it('draws nested pipelines as compiled', () => {
    const inner: Stage = { name: 'inner', op: 'pipeline', attributes: {}, inputs: [], outputs: [], stages: [] };
    const compiled = compileBundle(pipelineBundle([inner], 'outer'));
    expect(titles(parseXml(renderGraphSvg(compiled.graph)))).toEqual(['Root', 'Pipeline: outer', 'Pipeline: inner']);
  });

  it('draws a compiled feature pipeline', () => {
    const stages: Stage[] = [
      { name: 'index_state', op: 'string_indexer', attributes: { labels: attr.strings(['NY', 'CA']) }, inputs: [['input', 'state']], outputs: [['output', 'state_index']] },
      { name: 'index_city', op: 'string_indexer', attributes: { labels: attr.strings(['x']) }, inputs: [['input', 'city']], outputs: [['output', 'city_index']] },
      {
        name: 'one_hot_state',
        op: 'one_hot_encoder',
        attributes: { size: attr.long(2), drop_last: attr.boolean(true) },
        inputs: [['input', 'state_index']],
        outputs: [['output', 'state_oh']],
      },
    ];
    const compiled = compileBundle(pipelineBundle(stages, 'airbnb'));
    const doc = parseXml(renderGraphSvg(compiled.graph, { uniqueSchemas: false }));
    const className = (op: string) => opDefinition(op)!.className;
    expect(titles(doc)).toEqual([
      'Root',
      'Pipeline: airbnb',
      `${className('string_indexer')}: index_state`,
      `${className('string_indexer')}: index_city`,
      `${className('one_hot_encoder')}: one_hot_state`,
    ]);
    expect(texts(doc).filter((t) => t === 'Par')).toHaveLength(1);
    expect(all(doc, 'path').filter((p) => p.attributes.class === 'column').map((p) => all(p, 'title')[0]!.text)).toEqual(['state_index']);
  });
});
