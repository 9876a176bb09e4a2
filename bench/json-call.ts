// The benches' HTTP calls to svc's JSON routes: one request by fetch, the answer's text and JSON,
// and a status check that names the call when it fails.

/** An answer: its status, body text and the body parsed (undefined when empty or not JSON). */
export interface Reply {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON answers, read field by field
  json: any;
  text: string;
}

/** `text` parsed as JSON, or undefined. */
export function parseJson(text: string): unknown {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `method target` on 127.0.0.1:`port` with a bearer `token`; a Uint8Array body is sent as bytes
 * (`contentType`, default application/octet-stream), anything else as JSON.
 */
export async function call(port: number, method: string, target: string, token: string | undefined, body?: unknown, options: { contentType?: string; timeoutMs?: number } = {}): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (token) headers.Authorization = `Bearer ${token}`;
  let payload: BodyInit | undefined;
  if (body instanceof Uint8Array) {
    payload = body as unknown as BodyInit;
    headers['Content-Type'] = options.contentType ?? 'application/octet-stream';
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers['Content-Type'] = 'application/json';
  }
  const signal = options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs);
  const res = await fetch(`http://127.0.0.1:${port}${target}`, { method, headers, body: payload, signal });
  const text = await res.text();
  return { status: res.status, json: parseJson(text), text };
}

/** `r` when its status is one of `statuses`; otherwise an error naming `what` and the answer. */
export function expectStatus<T extends { status: number; text: string }>(r: T, what: string, ...statuses: number[]): T {
  if (!statuses.includes(r.status)) throw new Error(`${what} answered HTTP ${r.status}: ${r.text.slice(0, 300)}`);
  return r;
}
