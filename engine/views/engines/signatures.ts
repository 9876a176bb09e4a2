// Digital signatures out of a PDF, for views that must not carry them (a signature over bytes
// that a view changed would only claim something false). Removed: AcroForm fields of type /Sig
// (the type may be inherited from a parent field) with their widget annotations on every page,
// the AcroForm's /SigFlags, the catalog's /Perms (DocMDP/UR3 point at signature dictionaries)
// and /DSS (PAdES validation data: certificates, CRLs, OCSP answers). The /Type /Sig (and
// /DocTimeStamp) dictionaries, appearance streams and anything else only those reached are then
// unreachable and are dropped before the save, so no signature bytes remain in the file.
// Pages and their content streams are untouched: the text layer stays the same.

import { PDFArray, PDFDict, PDFDocument, PDFName, PDFRef, PDFStream, type PDFObject } from 'pdf-lib';
import { UnsupportedContent } from './errors.js';

const N = {
  AcroForm: PDFName.of('AcroForm'),
  Annots: PDFName.of('Annots'),
  DSS: PDFName.of('DSS'),
  FT: PDFName.of('FT'),
  Fields: PDFName.of('Fields'),
  Kids: PDFName.of('Kids'),
  Parent: PDFName.of('Parent'),
  Perms: PDFName.of('Perms'),
  Sig: PDFName.of('Sig'),
  SigFlags: PDFName.of('SigFlags'),
  Subtype: PDFName.of('Subtype'),
  Type: PDFName.of('Type'),
  DocTimeStamp: PDFName.of('DocTimeStamp'),
  Widget: PDFName.of('Widget'),
};

/** '%PDF-' within the first KiB, where readers look for it. */
function hasPdfHeader(bytes: Uint8Array): boolean {
  const head = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, 1024));
  return head.includes('%PDF-');
}

/** `forRewrite`: the document will be saved again, which an encrypted one cannot be. */
async function loadPdf(bytes: Uint8Array, forRewrite: boolean): Promise<PDFDocument> {
  if (!hasPdfHeader(bytes)) throw new UnsupportedContent('The bytes are not a PDF');
  let doc: PDFDocument;
  try {
    // updateMetadata: false keeps /Info as it is (no new producer or dates): the output is a
    // function of the input alone, as a view must be.
    doc = await PDFDocument.load(bytes, { updateMetadata: false, ignoreEncryption: true, throwOnInvalidObject: false });
  } catch (error) {
    throw new UnsupportedContent(`The PDF cannot be read: ${(error as Error).message}`);
  }
  // pdf-lib cannot decrypt: a rewrite would mix encrypted strings with an unencrypted file. The
  // dictionaries' structure (names, references) is not encrypted, so it can still be inspected.
  if (forRewrite && doc.isEncrypted) throw new UnsupportedContent('The PDF is encrypted: its signatures cannot be removed');
  return doc;
}

/** The field's /FT, looked up the /Parent chain (field types are inheritable). */
function fieldType(doc: PDFDocument, field: PDFDict): PDFName | undefined {
  const seen = new Set<PDFDict>();
  for (let node: PDFDict | undefined = field; node && !seen.has(node); node = doc.context.lookupMaybe(node.get(N.Parent), PDFDict)) {
    seen.add(node);
    const type = node.lookupMaybe(N.FT, PDFName);
    if (type) return type;
  }
  return undefined;
}

const isSignatureField = (doc: PDFDocument, field: PDFDict) => fieldType(doc, field) === N.Sig;

function isSignatureWidget(doc: PDFDocument, annotation: PDFDict): boolean {
  return annotation.lookupMaybe(N.Subtype, PDFName) === N.Widget && isSignatureField(doc, annotation);
}

function isSignatureDictionary(object: PDFObject | undefined): boolean {
  const dict = object instanceof PDFStream ? object.dict : object;
  if (!(dict instanceof PDFDict)) return false;
  const type = dict.get(N.Type);
  return type === N.Sig || type === N.DocTimeStamp;
}

/** Calls `visit` on every field dictionary of the AcroForm's field tree. */
function forEachField(doc: PDFDocument, visit: (field: PDFDict) => void): void {
  const acroForm = doc.catalog.lookupMaybe(N.AcroForm, PDFDict);
  const pending = [acroForm?.lookupMaybe(N.Fields, PDFArray)];
  const seen = new Set<PDFArray>();
  for (let kids = pending.pop(); kids !== undefined || pending.length > 0; kids = pending.pop()) {
    if (!kids || seen.has(kids)) continue;
    seen.add(kids);
    for (let i = 0; i < kids.size(); i++) {
      const field = doc.context.lookupMaybe(kids.get(i), PDFDict);
      if (!field) continue;
      visit(field);
      pending.push(field.lookupMaybe(N.Kids, PDFArray));
    }
  }
}

function pageAnnotations(doc: PDFDocument): PDFArray[] {
  return doc.getPages().flatMap((page) => {
    const annots = page.node.lookupMaybe(N.Annots, PDFArray);
    return annots ? [annots] : [];
  });
}

/** Whether the PDF has a signature field (in its AcroForm or as a page's widget) or a signature dictionary anywhere. */
export async function hasSignatureFields(pdf: Uint8Array): Promise<boolean> {
  const doc = await loadPdf(pdf, false);
  let found = false;
  forEachField(doc, (field) => {
    found ||= isSignatureField(doc, field);
  });
  if (found) return true;
  for (const annots of pageAnnotations(doc)) {
    for (let i = 0; i < annots.size(); i++) {
      const annotation = doc.context.lookupMaybe(annots.get(i), PDFDict);
      if (annotation && isSignatureWidget(doc, annotation)) return true;
    }
  }
  return doc.context.enumerateIndirectObjects().some(([, object]) => isSignatureDictionary(object));
}

/** Removes the entries of `array` for which `remove` is true. */
function removeWhere(doc: PDFDocument, array: PDFArray, remove: (entry: PDFDict) => boolean): void {
  for (let i = array.size() - 1; i >= 0; i--) {
    const entry = doc.context.lookupMaybe(array.get(i), PDFDict);
    if (entry && remove(entry)) array.remove(i);
  }
}

export async function stripSignatures(pdf: Uint8Array): Promise<Uint8Array> {
  const doc = await loadPdf(pdf, true);
  const acroForm = doc.catalog.lookupMaybe(N.AcroForm, PDFDict);
  if (acroForm) {
    // Signature fields out of every Kids array of the tree (and of /Fields itself); a widget's
    // field may be the widget itself or its parent, so both are checked by fieldType().
    const fields = acroForm.lookupMaybe(N.Fields, PDFArray);
    if (fields) removeWhere(doc, fields, (field) => isSignatureField(doc, field));
    forEachField(doc, (field) => {
      const kids = field.lookupMaybe(N.Kids, PDFArray);
      if (kids) removeWhere(doc, kids, (kid) => isSignatureField(doc, kid));
    });
    acroForm.delete(N.SigFlags);
  }
  for (const annots of pageAnnotations(doc)) removeWhere(doc, annots, (annotation) => isSignatureWidget(doc, annotation));
  doc.catalog.delete(N.Perms);
  doc.catalog.delete(N.DSS);
  dropUnreachableObjects(doc);
  // updateFieldAppearances: false: the remaining fields are saved as they were, not regenerated.
  return doc.save({ updateFieldAppearances: false, addDefaultPage: false });
}

/**
 * pdf-lib writes every indirect object it holds, reachable or not: the removed fields, widgets
 * and signature dictionaries would stay in the file. Everything not reachable from the trailer
 * (Root, Info) is dropped; that also drops objects the original file no longer used.
 */
function dropUnreachableObjects(doc: PDFDocument): void {
  const context = doc.context;
  const reachable = new Set<PDFRef>(); // PDFRef.of() interns refs, so identity is enough
  const pending: PDFObject[] = [context.trailerInfo.Root, context.trailerInfo.Info].filter((o): o is PDFObject => o !== undefined);
  for (let object = pending.pop(); object !== undefined; object = pending.pop()) {
    if (object instanceof PDFRef) {
      if (reachable.has(object)) continue;
      reachable.add(object);
      const target = context.lookup(object);
      if (target) pending.push(target);
    } else if (object instanceof PDFDict) {
      for (const [, value] of object.entries()) pending.push(value);
    } else if (object instanceof PDFArray) {
      for (let i = 0; i < object.size(); i++) pending.push(object.get(i));
    } else if (object instanceof PDFStream) {
      pending.push(object.dict);
    }
  }
  for (const [ref] of context.enumerateIndirectObjects()) {
    if (!reachable.has(ref)) context.delete(ref);
  }
}
