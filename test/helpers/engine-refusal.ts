// How the engine-level S3 tests (s3-multipart, s3-holds) read a refusal: S3's code for an S3
// refusal (engine/s3/errors.ts s3CodeOf), the SvcError's code otherwise, 'not refused' if none.
import { s3CodeOf } from '../../dist/engine/s3/errors.js';

export async function refusal(run: () => unknown): Promise<string> {
  try {
    await run();
  } catch (err) {
    return s3CodeOf(err) ?? (err as { code?: string }).code ?? String(err);
  }
  return 'not refused';
}
