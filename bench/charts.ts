/**
 * Standalone SVG charts for the benchmark report (issue 7), hand-written: no dependency, a
 * viewBox so they scale, escaped text, system fonts.
 *
 * - `groupedBarChart`: groups (scenarios) of bars (svc and its peer), each bar the median with a
 *   min–max whisker over the rounds, on a linear axis from 0.
 * - `ratioChart`: one horizontal bar per scenario, svc / peer (median, min–max whisker), with the
 *   parity line at 1.0x and each row's target marked; the axis stops at 3x (longer bars end in
 *   an arrow, their label gives the value).
 */

export interface Spread {
  median: number;
  min: number;
  max: number;
}

export interface BarGroup {
  /** Group label under the axis; `\n` splits it into lines. */
  label: string;
  /** One per series (undefined: not measured). */
  values: Array<Spread | undefined>;
}

export interface BarChartSpec {
  title: string;
  /** Axis unit, e.g. "req/s" or "MB/s". */
  unit: string;
  series: string[];
  groups: BarGroup[];
  subtitle?: string;
  width?: number;
}

export interface RatioRow {
  label: string;
  ratio?: Spread;
  /** svc / peer must reach this (no target: no mark, grey bar). */
  target?: number;
}

export interface RatioChartSpec {
  title: string;
  rows: RatioRow[];
  subtitle?: string;
  width?: number;
}

const COLORS = ['#2f6db5', '#e08a2c', '#5a9e4b', '#8c5fb0'];
const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"';

/** Text for SVG: &, <, >, " and ' escaped. */
export function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

const num = (n: number) => (Number.isFinite(n) ? Number(n.toFixed(1)) : 0);

/** 1,234 / 12.3k / 1.2M: short labels for axes and bars. */
export function shortNumber(n: number): string {
  if (!Number.isFinite(n)) return 'n/a';
  const a = Math.abs(n);
  if (a >= 1e6) return `${(n / 1e6).toFixed(a >= 1e7 ? 0 : 1).replace(/\.0$/, '')}M`;
  if (a >= 1e4) return `${(n / 1e3).toFixed(a >= 1e5 ? 0 : 1).replace(/\.0$/, '')}k`;
  if (a >= 100) return Math.round(n).toLocaleString('en-US');
  if (a >= 10) return n.toFixed(1).replace(/\.0$/, '');
  return n.toFixed(2).replace(/0$/, '').replace(/\.0?$/, '');
}

/** A round axis maximum and tick step (1, 2, 2.5 or 5 x 10^k) covering `max` in about `ticks` steps. */
export function niceScale(max: number, ticks = 5): { max: number; step: number } {
  if (!(max > 0) || !Number.isFinite(max)) return { max: 1, step: 0.2 };
  const raw = max / ticks;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  return { max: Math.ceil(max / step - 1e-9) * step, step };
}

function text(x: number, y: number, s: string, attrs = ''): string {
  return `<text x="${num(x)}" y="${num(y)}" ${attrs}>${escapeXml(s)}</text>`;
}

/** Splits `s` at spaces into lines of at most `max` characters (a longer word stays whole). */
export function wrap(s: string, max: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of s.split(' ')) {
    if (line && line.length + 1 + word.length > max) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}

/** Characters of 11 px text that fit in `px` (about 6 px each). */
const fits = (px: number) => Math.max(20, Math.floor(px / 6));

/** Lines the subtitle takes at this width. */
const subtitleLines = (width: number, subtitle?: string) => (subtitle ? wrap(subtitle, fits(width - 32)) : []);

function header(width: number, height: number, title: string, subtitle?: string): string[] {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${escapeXml(title)}" ${FONT} font-size="12">`,
    `<title>${escapeXml(title)}</title>`,
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`,
    text(16, 24, title, 'font-size="15" font-weight="600" fill="#222"'),
    ...subtitleLines(width, subtitle).map((l, i) => text(16, 42 + i * 14, l, 'font-size="11" fill="#555"')),
  ];
}

/** Grouped bars with min–max whiskers. */
export function groupedBarChart(spec: BarChartSpec): string {
  const width = spec.width ?? 820;
  const lines = Math.max(1, ...spec.groups.map((g) => g.label.split('\n').length));
  const top = 62 + subtitleLines(width, spec.subtitle).length * 14;
  const plotH = 260;
  const left = 64;
  const right = 16;
  const bottom = 18 + lines * 14;
  const height = top + plotH + bottom + 10;
  const plotW = width - left - right;
  const all = spec.groups.flatMap((g) => g.values.flatMap((v) => (v ? [v.max, v.median] : [])));
  const { max, step } = niceScale(Math.max(0, ...all.filter(Number.isFinite)));
  const y = (v: number) => top + plotH - (Math.max(0, v) / max) * plotH;
  const out = header(width, height, spec.title, spec.subtitle);
  // Legend, top right.
  let lx = width - right;
  for (let i = spec.series.length - 1; i >= 0; i--) {
    const w = 22 + spec.series[i].length * 7;
    lx -= w;
    out.push(`<rect x="${num(lx)}" y="${top - 26}" width="12" height="12" fill="${COLORS[i % COLORS.length]}"/>`, text(lx + 16, top - 16, spec.series[i], 'fill="#333"'));
  }
  // Axis and grid.
  for (let v = 0; v <= max + step / 2; v += step) {
    const yy = y(v);
    out.push(`<line x1="${left}" x2="${width - right}" y1="${num(yy)}" y2="${num(yy)}" stroke="${v === 0 ? '#888' : '#e3e3e3'}" stroke-width="1"/>`, text(left - 6, yy + 4, shortNumber(v), 'text-anchor="end" fill="#555"'));
  }
  out.push(text(14, top + plotH / 2, spec.unit, `transform="rotate(-90 14 ${num(top + plotH / 2)})" text-anchor="middle" fill="#555"`));
  const groupW = plotW / Math.max(1, spec.groups.length);
  const n = Math.max(1, spec.series.length);
  const barW = Math.min(48, (groupW * 0.72) / n);
  for (const [gi, g] of spec.groups.entries()) {
    const gx = left + gi * groupW + (groupW - barW * n) / 2;
    for (const [si, v] of g.values.entries()) {
      const x = gx + si * barW;
      if (!v || !Number.isFinite(v.median)) {
        out.push(text(x + barW / 2, top + plotH - 4, 'n/a', 'text-anchor="middle" font-size="10" fill="#999"'));
        continue;
      }
      const color = COLORS[si % COLORS.length];
      out.push(`<rect x="${num(x + 1)}" y="${num(y(v.median))}" width="${num(barW - 2)}" height="${num(top + plotH - y(v.median))}" fill="${color}"><title>${escapeXml(`${spec.series[si]}, ${g.label.replace(/\n/g, ' ')}: median ${shortNumber(v.median)} ${spec.unit} (min ${shortNumber(v.min)}, max ${shortNumber(v.max)})`)}</title></rect>`);
      if (v.max > v.min) {
        const cx = x + barW / 2;
        out.push(`<path d="M${num(cx)} ${num(y(v.max))}V${num(y(v.min))}M${num(cx - 4)} ${num(y(v.max))}H${num(cx + 4)}M${num(cx - 4)} ${num(y(v.min))}H${num(cx + 4)}" stroke="#222" stroke-width="1.2" fill="none"/>`);
      }
      out.push(text(x + barW / 2, Math.min(y(v.median), y(v.max)) - 4, shortNumber(v.median), 'text-anchor="middle" font-size="10" fill="#333"'));
    }
    g.label.split('\n').forEach((l, li) => out.push(text(left + gi * groupW + groupW / 2, top + plotH + 16 + li * 14, l, 'text-anchor="middle" fill="#333"')));
  }
  out.push('</svg>', '');
  return out.join('\n');
}

/** Horizontal bars of svc / peer with whiskers, the 1.0x line and each row's target. */
export function ratioChart(spec: RatioChartSpec): string {
  const width = spec.width ?? 820;
  const rowH = 24;
  const top = 58 + subtitleLines(width, spec.subtitle).length * 14;
  const left = Math.min(360, 24 + 6.6 * Math.max(20, ...spec.rows.map((r) => r.label.length)));
  const right = 70;
  const plotW = width - left - right;
  const caption = wrap('svc / peer: median of the rounds, whisker min–max, red mark the target; green meets it, orange misses it, grey has none', fits(width - 32));
  const height = top + spec.rows.length * rowH + 26 + caption.length * 14;
  const values = spec.rows.flatMap((r) => [r.ratio?.max ?? 0, r.ratio?.median ?? 0, r.target ?? 0]).filter(Number.isFinite);
  // The axis ends at 3x at most: a 6x bar would squash the rest; longer bars are clipped with an arrow.
  const { max, step } = niceScale(Math.max(1.2, Math.min(3, Math.max(...values))), 6);
  const x = (v: number) => left + (Math.max(0, Math.min(v, max)) / max) * plotW;
  const bottomY = top + spec.rows.length * rowH;
  const out = header(width, height, spec.title, spec.subtitle);
  for (let v = 0; v <= max + step / 2; v += step) {
    const xx = x(v);
    out.push(`<line x1="${num(xx)}" x2="${num(xx)}" y1="${top - 6}" y2="${bottomY}" stroke="#e3e3e3"/>`, text(xx, bottomY + 16, `${shortNumber(v)}x`, 'text-anchor="middle" fill="#555"'));
  }
  out.push(`<line x1="${num(x(1))}" x2="${num(x(1))}" y1="${top - 10}" y2="${bottomY}" stroke="#666" stroke-width="1.5"/>`, text(x(1), top - 14, 'parity 1.0x', 'text-anchor="middle" font-size="10" fill="#555"'));
  caption.forEach((l, i) => out.push(text(width / 2, bottomY + 32 + i * 14, l, 'text-anchor="middle" font-size="11" fill="#555"')));
  for (const [i, r] of spec.rows.entries()) {
    const cy = top + i * rowH + rowH / 2;
    out.push(text(left - 8, cy + 4, r.label, 'text-anchor="end" fill="#222"'));
    if (!r.ratio || !Number.isFinite(r.ratio.median)) {
      out.push(text(left + 4, cy + 4, 'not measured', 'font-size="11" fill="#999"'));
      continue;
    }
    const pass = r.target === undefined ? undefined : r.ratio.median >= r.target;
    const color = pass === undefined ? '#9a9a9a' : pass ? '#4a9a5a' : '#d0743c';
    out.push(`<rect x="${left}" y="${num(cy - 7)}" width="${num(x(r.ratio.median) - left)}" height="14" fill="${color}"><title>${escapeXml(`${r.label}: ${r.ratio.median.toFixed(2)}x (min ${r.ratio.min.toFixed(2)}, max ${r.ratio.max.toFixed(2)})${r.target === undefined ? '' : `, target ${r.target}x`}`)}</title></rect>`);
    if (r.ratio.max > r.ratio.min) out.push(`<path d="M${num(x(r.ratio.min))} ${num(cy)}H${num(x(r.ratio.max))}M${num(x(r.ratio.min))} ${num(cy - 4)}V${num(cy + 4)}M${num(x(r.ratio.max))} ${num(cy - 4)}V${num(cy + 4)}" stroke="#222" stroke-width="1.2" fill="none"/>`);
    if (r.target !== undefined) out.push(`<line x1="${num(x(r.target))}" x2="${num(x(r.target))}" y1="${num(cy - 10)}" y2="${num(cy + 10)}" stroke="#c0392b" stroke-width="2.5"/>`);
    const clipped = r.ratio.max > max || r.ratio.median > max;
    const end = Math.max(x(r.ratio.median), x(r.ratio.max), r.target === undefined ? 0 : x(r.target) + 2);
    out.push(text(end + 6, cy + 4, `${r.ratio.median.toFixed(2)}x${clipped ? ' →' : ''}`, 'font-size="11" fill="#222"'));
  }
  out.push('</svg>', '');
  return out.join('\n');
}
