import { seededBytes } from './http.js';

const KiB = 1024;

/** A PDF-like body: objects of 5..40 KiB, an xref-ish trailer and %%EOF. */
export function syntheticPdf(objects: number, seed: number, firstObject = 1, header = true): Buffer {
  const parts: Buffer[] = header ? [Buffer.from('%PDF-1.7\n')] : [];
  for (let i = 0; i < objects; i++) {
    const len = 5 * KiB + ((i * 7919 + seed) % (35 * KiB));
    parts.push(Buffer.from(`${firstObject + i} 0 obj\n<< /Length ${len} >>\nstream\n`), seededBytes(len, seed + i), Buffer.from('\nendstream\nendobj\n'));
  }
  parts.push(Buffer.from(`xref\n0 ${objects}\ntrailer\n<< /Size ${firstObject + objects} >>\nstartxref\n0\n%%EOF\n`));
  return Buffer.concat(parts);
}
