// Progress on stderr: a one-line bar redrawn at most ten times a second on a terminal, else a
// plain line every 10%. Notes (retries, resumes) go on their own lines either way.

const REDRAW_MS = 100;
const WINDOW_MS = 5000;

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

export function formatDuration(s: number): string {
  if (!Number.isFinite(s)) return '--:--';
  const t = Math.round(s);
  const h = Math.floor(t / 3600);
  const m = Math.floor((t % 3600) / 60);
  const sec = String(t % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${sec}` : `${m}:${sec}`;
}

export class Progress {
  private readonly tty: boolean;
  private samples: Array<[number, number]> = [];
  private lastDraw = 0;
  private drawn = false;
  private nextDecile: number;
  private current = 0;
  private finished = false;

  constructor(
    private readonly label: string,
    private readonly total: number,
    start = 0,
    private readonly out: NodeJS.WriteStream = process.stderr,
  ) {
    this.tty = out.isTTY === true;
    this.current = start;
    this.nextDecile = Math.floor((start / Math.max(total, 1)) * 10) + 1;
    this.samples.push([Date.now(), start]);
  }

  /** Bytes done so far (absolute; may go back when a part is sent again). */
  update(done: number): void {
    const now = Date.now();
    if (done < this.current) this.samples = [];
    this.current = done;
    this.samples.push([now, done]);
    while (this.samples.length > 2 && now - this.samples[0][0] > WINDOW_MS) this.samples.shift();
    if (this.tty) {
      if (now - this.lastDraw >= REDRAW_MS) this.draw(now);
      return;
    }
    const pct = (done / Math.max(this.total, 1)) * 100;
    if (pct >= this.nextDecile * 10 && done < this.total) {
      this.nextDecile = Math.floor(pct / 10) + 1;
      this.out.write(`${this.label}: ${this.summary()}\n`);
    }
  }

  /** Continues from `done` as if starting there (a resumed transfer): no speed from the jump. */
  restart(done: number): void {
    this.current = done;
    this.samples = [[Date.now(), done]];
    this.nextDecile = Math.floor((done / Math.max(this.total, 1)) * 10) + 1;
  }

  /** A message on its own line, keeping the bar below it. */
  note(line: string): void {
    if (this.tty && this.drawn) this.out.write('\r\x1b[K');
    this.out.write(`${line}\n`);
    if (this.tty && this.drawn && !this.finished) this.draw(Date.now());
  }

  /** The last state, then a newline (terminal) or a final line. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.tty) {
      this.draw(Date.now());
      this.out.write('\n');
    } else {
      this.out.write(`${this.label}: ${this.summary()}\n`);
    }
  }

  /** Ends the bar's line (terminal) so that an error message starts on its own line. */
  abort(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.tty && this.drawn) this.out.write('\n');
  }

  private speed(): number {
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    if (!first || !last || last[0] - first[0] < 100) return NaN;
    return ((last[1] - first[1]) / (last[0] - first[0])) * 1000;
  }

  private summary(): string {
    const pct = this.total > 0 ? ((this.current / this.total) * 100).toFixed(1) : '100.0';
    const speed = this.speed();
    const rate = Number.isFinite(speed) ? `${(speed / 1e6).toFixed(1)} MB/s` : '-- MB/s';
    const eta = Number.isFinite(speed) && speed > 0 ? formatDuration((this.total - this.current) / speed) : '--:--';
    return `${formatBytes(this.current)} / ${formatBytes(this.total)}  ${pct}%  ${rate}  ETA ${eta}`;
  }

  private draw(now: number): void {
    this.lastDraw = now;
    this.drawn = true;
    const width = 20;
    const filled = this.total > 0 ? Math.min(width, Math.floor((this.current / this.total) * width)) : width;
    let line = `${this.label} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${this.summary()}`;
    const columns = this.out.columns ?? 0;
    if (columns > 10 && line.length >= columns) line = line.slice(0, columns - 1);
    this.out.write(`\r${line}\x1b[K`);
  }
}
