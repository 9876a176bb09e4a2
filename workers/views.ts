// Job tasks of views and workflows (engine/views, engine/workflows): the content engines applied
// to bytes read on the main thread. Pure computations; storing and recording happen on the main
// thread after them.

import { JobError } from '../engine/jobs/errors.js';
import type { JobTaskPayload } from '../engine/jobs/task-runner.js';
import { UnsupportedContent, extractText, findEntities, redact, stripSignatures } from '../engine/views/engines/index.js';
import type { MaterializeInput, MaterializeOutput } from '../engine/views/views.js';
import type { TextTaskInput, TextWorkflowOutput } from '../engine/workflows/workflows.js';

/** Content the engines cannot handle fails the job for good, as 422 view_unsupported does. */
async function engine<T>(work: () => Promise<T> | T): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof UnsupportedContent) throw new JobError('view_unsupported', err.message, false);
    throw err;
  }
}

/** A view's operations in order: stripSignatures on the PDF, then its text, then redaction of the text. */
export async function materialize({ input, prepared }: JobTaskPayload<MaterializeInput>): Promise<MaterializeOutput> {
  let bytes = (prepared as { bytes: Uint8Array }).bytes;
  let text: string | undefined;
  for (const op of input.ops) {
    if (op.op === 'stripSignatures') bytes = await engine(() => stripSignatures(bytes));
    else if (op.op === 'ocrText') text = (await engine(() => extractText(bytes, input.base.mediaType, op.language))).text;
    else text = await engine(() => redact(text ?? Buffer.from(bytes).toString('utf8'), op.profile));
  }
  return { bytes: text === undefined ? bytes : Buffer.from(text, 'utf8') };
}

/** The OCR workflow: the text of every page (text layer or OCR), with the pages' sources and confidence. */
export async function ocr({ prepared }: JobTaskPayload): Promise<TextWorkflowOutput> {
  const { bytes, mediaType, language } = prepared as TextTaskInput;
  const extracted = await engine(() => extractText(bytes, mediaType, language));
  return {
    textBytes: Buffer.from(extracted.text, 'utf8'),
    data: { text: extracted.text, language: extracted.language, pages: extracted.pages },
    engine: extracted.engine,
    ...(extracted.confidence === undefined ? {} : { confidence: extracted.confidence }),
  };
}

/** The entities workflow: people, organizations, places, dates, e-mail addresses and phone numbers of the text. */
export async function entities({ prepared }: JobTaskPayload): Promise<TextWorkflowOutput> {
  const { bytes, mediaType, language, fromView } = prepared as TextTaskInput;
  const text = fromView ? Buffer.from(bytes).toString('utf8') : (await engine(() => extractText(bytes, mediaType, language))).text;
  const found = findEntities(text);
  return {
    ...(fromView ? {} : { textBytes: Buffer.from(text, 'utf8') }),
    data: { ...found.entities },
    engine: found.engine,
    confidence: found.confidence,
  };
}
