// Multi-page TIFF (scans, faxes): tesseract reads only the first image of a TIFF, so each page is
// handed to it as a TIFF of its own. Strips and tiles are addressed by absolute offsets, so a
// page's TIFF is the file's bytes with the header pointing at that page's IFD and that IFD's
// "next" pointer cleared: one copy of the file per page, made when the page is OCR'd.

import { UnsupportedContent } from './errors.js';
import { TIFF_MAX_PAGES } from '../../base/limits.js';

/** Enough for any real document; a cycle or a corrupt chain stops here rather than looping. */
const MAX_PAGES = TIFF_MAX_PAGES;

interface TiffLayout {
  littleEndian: boolean;
  /** Offsets of the image file directories, in page order. */
  ifdOffsets: number[];
}

function readLayout(bytes: Uint8Array): TiffLayout | undefined {
  if (bytes.length < 8) return undefined;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const order = view.getUint16(0);
  const littleEndian = order === 0x4949; // 'II'
  if (!littleEndian && order !== 0x4d4d) return undefined; // 'MM'
  // 42 is classic TIFF; BigTIFF (43) has 64-bit offsets and is left whole to tesseract.
  if (view.getUint16(2, littleEndian) !== 42) return undefined;
  const ifdOffsets: number[] = [];
  const seen = new Set<number>();
  let offset = view.getUint32(4, littleEndian);
  while (offset !== 0 && ifdOffsets.length < MAX_PAGES) {
    if (seen.has(offset) || offset + 2 > bytes.length) break;
    const entries = view.getUint16(offset, littleEndian);
    const nextPointer = offset + 2 + entries * 12;
    if (nextPointer + 4 > bytes.length) break;
    seen.add(offset);
    ifdOffsets.push(offset);
    offset = view.getUint32(nextPointer, littleEndian);
  }
  return { littleEndian, ifdOffsets };
}

export function isTiff(bytes: Uint8Array): boolean {
  return bytes.length >= 4 && ((bytes[0] === 0x49 && bytes[1] === 0x49 && bytes[2] === 42 && bytes[3] === 0) || (bytes[0] === 0x4d && bytes[1] === 0x4d && bytes[2] === 0 && bytes[3] === 42));
}

/** The number of pages (IFDs) of a classic TIFF; 1 for BigTIFF, which is passed on whole. */
export function tiffPageCount(bytes: Uint8Array): number {
  if (!isTiff(bytes)) throw new UnsupportedContent('The bytes are not a TIFF image');
  const layout = readLayout(bytes);
  if (!layout) return 1;
  if (layout.ifdOffsets.length === 0) throw new UnsupportedContent('The TIFF image has no image directory');
  return layout.ifdOffsets.length;
}

/** Page `index` (0-based) as a single-page TIFF; the bytes themselves when there is one page. */
export function tiffPage(bytes: Uint8Array, index: number): Uint8Array {
  const layout = readLayout(bytes);
  if (!layout || layout.ifdOffsets.length <= 1) return bytes;
  const ifd = layout.ifdOffsets[index];
  if (ifd === undefined) throw new RangeError(`No TIFF page ${index}`);
  const page = bytes.slice();
  const view = new DataView(page.buffer);
  view.setUint32(4, ifd, layout.littleEndian);
  view.setUint32(ifd + 2 + view.getUint16(ifd, layout.littleEndian) * 12, 0, layout.littleEndian);
  return page;
}
