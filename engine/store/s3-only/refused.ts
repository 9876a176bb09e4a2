/** An S3-only node may not start: another is live on a server without conditional writes (the message says which). */
export class S3OnlyRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'S3OnlyRefused';
  }
}
