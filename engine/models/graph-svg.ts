// Draws a model's graph as a self-contained SVG document, in the shape the reference runtime
// draws with reftree + Graphviz: a Root node, then each pipeline as its own box followed by its
// stages in layers ("Par" when several stages of a layer can run side by side), each box titled
// `<className>: <name>` with one row per schema field, output fields highlighted, and `next`
// links between consecutive layers.
//
// Geometry is computed in points (72 per inch, as Graphviz does); `density` is the number of
// pixels per inch of the rendered image, so it sets width/height while the viewBox stays put.

import type { GraphStage } from './compile.js';
import { queryError } from './errors.js';
import { typeLabel, type Field } from './types.js';

interface GraphOptions {
  /** Hide a pipeline's own input fields (its stages show them). */
  elideParentSchema: boolean;
  /** false: link each column from the stage producing it to every stage consuming it. */
  uniqueSchemas: boolean;
  /** Pixels per inch of the drawing. */
  density: number;
  /** Gap between layers, in inches. */
  verticalSpacing: number;
}

const DEFAULT_GRAPH_OPTIONS: Readonly<GraphOptions> = {
  elideParentSchema: true,
  uniqueSchemas: true,
  density: 50,
  verticalSpacing: 0.5,
};

const POINTS_PER_INCH = 72;
const FONT_SIZE = 12;
/** Advance of one monospace character at FONT_SIZE: text width is estimated, not measured. */
const CHAR_WIDTH = FONT_SIZE * 0.6;
const ROW_HEIGHT = 18;
const HEADER_HEIGHT = 22;
const BOX_PAD_X = 8;
const MIN_BOX_WIDTH = 60;
const PAR_PAD = 10;
const PAR_LABEL_HEIGHT = 16;
const SIBLING_GAP = 18;
const MIN_LAYER_GAP = 8;
const MARGIN = 4;
/** How far a column link bulges right of the boxes it joins (its curve reaches about 3/4 of it). */
const LINK_REACH = 54;

interface Row {
  text: string;
  field: string;
  output: boolean;
}

interface Box {
  kind: 'box';
  title: string;
  rows: Row[];
  /** Leaf stages take part in column links; the Root and pipeline boxes do not. */
  leaf: boolean;
  width: number;
  height: number;
}

interface Group {
  kind: 'seq' | 'par';
  items: Block[];
  width: number;
  height: number;
}

type Block = Box | Group;

interface Point {
  x: number;
  y: number;
}

/**
 * Groups a pipeline's stages into layers: a layer holds the remaining stages none of whose
 * inputs is produced by another remaining stage; repeated until every stage is placed.
 */
export function pipelineLayers(stages: readonly GraphStage[]): GraphStage[][] {
  const layers: GraphStage[][] = [];
  let remaining = [...stages];
  while (remaining.length > 0) {
    const producerOf = new Map<string, GraphStage>();
    for (const stage of remaining) for (const f of stage.outputs) producerOf.set(f.name, stage);
    const ready = remaining.filter((stage) =>
      stage.inputs.every((f) => {
        const producer = producerOf.get(f.name);
        return producer === undefined || producer === stage;
      }),
    );
    // A cycle cannot come out of the compiler; take stages in order rather than loop forever.
    const layer = ready.length > 0 ? ready : [remaining[0]!];
    layers.push(layer);
    remaining = remaining.filter((s) => !layer.includes(s));
  }
  return layers;
}

export function renderGraphSvg(root: GraphStage, options: Partial<GraphOptions> = {}): string {
  const opts = checkedOptions({ ...DEFAULT_GRAPH_OPTIONS, ...options });
  const layerGap = Math.max(opts.verticalSpacing * POINTS_PER_INCH, MIN_LAYER_GAP);
  const tree = sequence([box('Root', [], false), stageBlock(root, opts, layerGap)], layerGap);

  const linkMargin = opts.uniqueSchemas ? 0 : LINK_REACH;
  const width = tree.width + 2 * MARGIN + linkMargin;
  const height = tree.height + 2 * MARGIN;
  const drawing = new Drawing(layerGap);
  drawing.place(tree, MARGIN, MARGIN);
  if (!opts.uniqueSchemas) drawing.columnLinks();

  const px = (points: number) => Math.max(1, Math.ceil((points / POINTS_PER_INCH) * opts.density));
  return [
    '<?xml version="1.0" encoding="UTF-8" standalone="no"?>',
    `<svg xmlns="http://www.w3.org/2000/svg" width="${px(width)}" height="${px(height)}" ` +
      `viewBox="0 0 ${num(width)} ${num(height)}" font-family="monospace" font-size="${FONT_SIZE}">`,
    `<title>${xml(`${root.className}: ${root.name}`)}</title>`,
    '<defs>',
    '<marker id="arrowhead" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto">',
    '<path d="M0,0 L10,5 L0,10 z" fill="#333333"/>',
    '</marker>',
    '</defs>',
    `<rect x="0" y="0" width="${num(width)}" height="${num(height)}" fill="#ffffff"/>`,
    ...drawing.parts,
    '</svg>',
    '',
  ].join('\n');
}

function checkedOptions(opts: GraphOptions): GraphOptions {
  if (!Number.isFinite(opts.density) || opts.density <= 0 || opts.density > 10_000) {
    throw queryError(`density must be a positive number up to 10000, got ${opts.density}`);
  }
  if (!Number.isFinite(opts.verticalSpacing) || opts.verticalSpacing < 0 || opts.verticalSpacing > 100) {
    throw queryError(`vertical-spacing must be a number from 0 to 100, got ${opts.verticalSpacing}`);
  }
  return opts;
}

/** A stage's block: a leaf is a box; a pipeline is its box followed by its layers. */
function stageBlock(stage: GraphStage, opts: GraphOptions, layerGap: number): Block {
  const title = `${stage.className}: ${stage.name}`;
  if (!stage.children) return box(title, schemaRows(stage.inputs, stage.outputs), true);
  const ownInputs = opts.elideParentSchema ? [] : stage.inputs;
  const layers = pipelineLayers(stage.children).map((layer) =>
    layer.length === 1 ? stageBlock(layer[0]!, opts, layerGap) : par(layer.map((s) => stageBlock(s, opts, layerGap))),
  );
  return sequence([box(title, schemaRows(ownInputs, stage.outputs), false), ...layers], layerGap);
}

function schemaRows(inputs: Field[], outputs: Field[]): Row[] {
  const row = (output: boolean) => (f: Field) => ({ text: `${f.name}: ${typeLabel(f.type)}`, field: f.name, output });
  return [...inputs.map(row(false)), ...outputs.map(row(true))];
}

function box(title: string, rows: Row[], leaf: boolean): Box {
  const widest = Math.max(title.length, ...rows.map((r) => r.text.length));
  return {
    kind: 'box',
    title,
    rows,
    leaf,
    width: Math.max(MIN_BOX_WIDTH, widest * CHAR_WIDTH + 2 * BOX_PAD_X),
    height: HEADER_HEIGHT + rows.length * ROW_HEIGHT,
  };
}

function sequence(items: Block[], gap: number): Group {
  return {
    kind: 'seq',
    items,
    width: Math.max(...items.map((b) => b.width)),
    height: items.reduce((sum, b) => sum + b.height, 0) + gap * (items.length - 1),
  };
}

function par(items: Block[]): Group {
  return {
    kind: 'par',
    items,
    width: 2 * PAR_PAD + items.reduce((sum, b) => sum + b.width, 0) + SIBLING_GAP * (items.length - 1),
    height: PAR_LABEL_HEIGHT + 2 * PAR_PAD + Math.max(...items.map((b) => b.height)),
  };
}

/** Places blocks at absolute positions and collects their SVG elements. */
class Drawing {
  readonly parts: string[] = [];
  private readonly producers = new Map<string, { at: Point; box: Box }>();
  private readonly consumers: { field: string; at: Point; box: Box }[] = [];

  constructor(private readonly layerGap: number) {}

  place(block: Block, x: number, y: number): void {
    if (block.kind === 'box') this.drawBox(block, x, y);
    else if (block.kind === 'par') this.drawPar(block, x, y);
    else this.drawSequence(block, x, y);
  }

  /**
   * Column links, drawn over the boxes: an arc from the producer's row to the consumer's row,
   * both on the right edge, bulging right so that it stays clear of the boxes of one column.
   */
  columnLinks(): void {
    for (const consumer of this.consumers) {
      const producer = this.producers.get(consumer.field);
      if (!producer || producer.box === consumer.box) continue;
      const from = producer.at;
      const to = consumer.at;
      const bulge = Math.max(from.x, to.x) + LINK_REACH;
      this.parts.push(
        `<path class="column" d="M${num(from.x)},${num(from.y)} C${num(bulge)},${num(from.y)} ` +
          `${num(bulge)},${num(to.y)} ${num(to.x)},${num(to.y)}" fill="none" stroke="#3f6fb5" ` +
          `stroke-dasharray="4 3" marker-end="url(#arrowhead)"><title>${xml(consumer.field)}</title></path>`,
      );
    }
  }

  private drawSequence(seq: Group, x: number, y: number): void {
    const centre = x + seq.width / 2;
    let top = y;
    seq.items.forEach((item, i) => {
      if (i > 0) {
        const from = top - this.layerGap;
        this.parts.push(
          `<line class="next" x1="${num(centre)}" y1="${num(from)}" x2="${num(centre)}" y2="${num(top)}" ` +
            `stroke="#333333" marker-end="url(#arrowhead)"/>`,
          `<text x="${num(centre + 6)}" y="${num(from + this.layerGap / 2 + 4)}" font-size="10" fill="#333333">next</text>`,
        );
      }
      this.place(item, centre - item.width / 2, top);
      top += item.height + this.layerGap;
    });
  }

  private drawPar(group: Group, x: number, y: number): void {
    this.parts.push(
      `<g class="par"><rect x="${num(x)}" y="${num(y)}" width="${num(group.width)}" height="${num(group.height)}" ` +
        `fill="none" stroke="#888888" stroke-dasharray="6 4" rx="6"/>` +
        `<text x="${num(x + PAR_PAD)}" y="${num(y + PAR_LABEL_HEIGHT - 2)}" font-size="11" fill="#555555">Par</text></g>`,
    );
    let left = x + PAR_PAD;
    const top = y + PAR_LABEL_HEIGHT + PAR_PAD;
    for (const item of group.items) {
      this.place(item, left, top);
      left += item.width + SIBLING_GAP;
    }
  }

  private drawBox(b: Box, x: number, y: number): void {
    const out = [
      `<g class="stage"><title>${xml(b.title)}</title>`,
      `<rect x="${num(x)}" y="${num(y)}" width="${num(b.width)}" height="${num(HEADER_HEIGHT)}" fill="#dde6f3" stroke="none"/>`,
      `<text x="${num(x + BOX_PAD_X)}" y="${num(y + HEADER_HEIGHT * 0.68)}" font-weight="bold">${xml(b.title)}</text>`,
    ];
    b.rows.forEach((row, i) => {
      const top = y + HEADER_HEIGHT + i * ROW_HEIGHT;
      const cls = row.output ? 'field output' : 'field input';
      out.push(
        `<rect class="${cls}" x="${num(x)}" y="${num(top)}" width="${num(b.width)}" height="${num(ROW_HEIGHT)}" ` +
          `fill="${row.output ? '#fff1b8' : '#ffffff'}" stroke="#bbbbbb" stroke-width="0.5"/>`,
        `<text x="${num(x + BOX_PAD_X)}" y="${num(top + ROW_HEIGHT * 0.7)}">${xml(row.text)}</text>`,
      );
      if (!b.leaf) return;
      const at = { x: x + b.width, y: top + ROW_HEIGHT / 2 };
      if (row.output) this.producers.set(row.field, { at, box: b });
      else this.consumers.push({ field: row.field, at, box: b });
    });
    out.push(
      `<rect x="${num(x)}" y="${num(y)}" width="${num(b.width)}" height="${num(b.height)}" fill="none" stroke="#333333"/>`,
      '</g>',
    );
    this.parts.push(out.join(''));
  }
}

const num = (n: number): string => String(Math.round(n * 100) / 100);

/** Characters XML 1.0 cannot carry at all, even escaped (controls, lone surrogates, U+FFFE/F). */
const NOT_XML_CHAR = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu;
const XML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };

/** Text safe for XML content and attribute values. */
export function xml(text: string): string {
  return text.replace(NOT_XML_CHAR, '\uFFFD').replace(/[&<>"']/g, (c) => XML_ESCAPES[c]!);
}
