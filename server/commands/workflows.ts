// A workflow run's request parsed into its typed command (engine/workflows/workflows.ts,
// WorkflowRun): `{ inputs: { sourceVersion?, targetNamespace?, options? } }` or no body; the
// options each workflow takes (redact: profile, language; OCR and entities: language).

import { badRequest, isNamespaceUrn, isPlainObject, onlyKeys } from '../../engine/documents/model.js';
import { normalizeLanguage, redactionProfile } from '../../engine/views/view-spec.js';
import { REDACT_WORKFLOW, type WorkflowRun } from '../../engine/workflows/workflows.js';
import { bodyUrns } from './urns.js';

/** The URN the body names (inputs.targetNamespace), checked before the engine sees the request. */
export function workflowRunUrns(body: unknown): void {
  if (isPlainObject(body)) bodyUrns(body.inputs, ['targetNamespace']);
}

/** POST /v1/documents/{id}/workflows/{workflowUrn}/run (a workflow this service runs): the run's command. */
export function parseWorkflowRun(workflowUrn: string, body: unknown): WorkflowRun {
  const b = body === undefined ? {} : body;
  if (!isPlainObject(b)) throw badRequest('The body must be { inputs: { sourceVersion?, targetNamespace?, options? } }');
  onlyKeys(b, ['inputs'], 'workflow run');
  const inputs = b.inputs === undefined ? {} : b.inputs;
  if (!isPlainObject(inputs)) throw badRequest('inputs must be an object');
  onlyKeys(inputs, ['sourceVersion', 'targetNamespace', 'options'], 'inputs');
  const options = inputs.options === undefined ? {} : inputs.options;
  if (!isPlainObject(options)) throw badRequest('inputs.options must be an object');
  const { targetNamespace, sourceVersion = 'current' } = inputs;
  if (targetNamespace !== undefined && !isNamespaceUrn(targetNamespace)) throw badRequest('inputs.targetNamespace must be a namespace URN (urn:svc:<name>)');
  if (typeof sourceVersion !== 'string') throw badRequest('inputs.sourceVersion must be "current" or a versionId');
  if (workflowUrn === REDACT_WORKFLOW) {
    onlyKeys(options, ['profile', 'language'], 'options');
    if (targetNamespace !== undefined) throw badRequest('The redact workflow writes a view, not a namespace: leave targetNamespace out');
    const profile = redactionProfile(options.profile ?? 'public');
    return { sourceVersion, language: normalizeLanguage(options.language), profile };
  }
  onlyKeys(options, ['language'], 'options');
  return { sourceVersion, language: normalizeLanguage(options.language), ...(targetNamespace === undefined ? {} : { targetNamespace }) };
}
