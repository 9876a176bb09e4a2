/**
 * The content engines cannot handle these bytes, this media type or this option (a language
 * whose OCR data is not installed, an unknown redaction profile). The caller maps it to
 * 422 `view_unsupported`; any other error is internal.
 */
export class UnsupportedContent extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsupportedContent';
  }
}
