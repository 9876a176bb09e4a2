// An upper bound on what validating one datum against a schema costs, so that the validator
// (./validator.ts) arms its deadline only where the bound says the call could come near it. The
// deadline is a vm timeout, and V8 starts a watchdog thread for every timed call: about 0.4 ms
// of CPU each on this machine, more than validating a typical metadata entry itself.
//
// The bound: every subschema applies to the data nodes at one depth of the data (a keyword
// either stays on its node, as allOf does, or descends one level, as properties and items do),
// whose subtrees are disjoint, and each application costs at most the size of the subtree it
// reads (const and enum compare whole values, pattern and format read whole strings). So one
// validation costs at most
//     fanout(schema) × weight(data)
// steps, where fanout counts the subschemas with every local $ref expanded (an enum counts its
// values), and weight counts the data's nodes, its strings' and property names' lengths. A
// recursive schema, a $ref that is not a local JSON pointer, or a $dynamicRef has no bound here
// (Infinity): it always runs under the deadline.

/** Keywords whose value is one subschema (JSON Schema 2020-12, and the older forms ajv still reads). */
const ONE = ['additionalProperties', 'propertyNames', 'items', 'contains', 'not', 'if', 'then', 'else', 'unevaluatedItems', 'unevaluatedProperties', 'contentSchema', 'additionalItems'];
/** Keywords whose value maps names to subschemas ($defs is not applied unless referenced). */
const MAP = ['properties', 'patternProperties', 'dependentSchemas', 'dependencies'];
/** Keywords whose value is a list of subschemas. */
const LIST = ['allOf', 'anyOf', 'oneOf', 'prefixItems', 'items'];

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The subschema a local JSON pointer (`#`, `#/$defs/a`) names in `root`, or undefined. */
function resolveLocal(root: unknown, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) return undefined;
  let at: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    const token = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(at)) at = at[Number(token)];
    else if (isObject(at)) at = at[token];
    else return undefined;
  }
  return at;
}

/** Subschema applications per data step, refs expanded; Infinity when unbounded or past `cap`. */
export function schemaFanout(root: unknown, cap = 1e7): number {
  const expanding = new Set<unknown>();
  const memo = new Map<unknown, number>();
  const size = (schema: unknown): number => {
    if (!isObject(schema)) return 1;
    const known = memo.get(schema);
    if (known !== undefined) return known;
    if (expanding.has(schema) || '$dynamicRef' in schema || '$recursiveRef' in schema) return Infinity;
    expanding.add(schema);
    let total = 1 + (Array.isArray(schema.enum) ? schema.enum.length : 0);
    if (typeof schema.$ref === 'string') {
      const target = resolveLocal(root, schema.$ref);
      total += target === undefined ? Infinity : size(target);
    }
    for (const k of ONE) if (k in schema && !Array.isArray(schema[k])) total += size(schema[k]);
    for (const k of MAP) if (isObject(schema[k])) for (const v of Object.values(schema[k])) total += Array.isArray(v) ? 0 : size(v);
    for (const k of LIST) if (Array.isArray(schema[k])) for (const v of schema[k] as unknown[]) total += size(v);
    expanding.delete(schema);
    const bounded = total > cap ? Infinity : total;
    memo.set(schema, bounded);
    return bounded;
  };
  return size(root);
}

/** The data's nodes plus its strings' and property names' lengths, counted up to `cap` (then `cap + 1`). */
export function dataWeight(data: unknown, cap: number): number {
  let weight = 0;
  const stack: unknown[] = [data];
  while (stack.length > 0) {
    const v = stack.pop();
    weight += 1;
    if (typeof v === 'string') weight += v.length;
    else if (Array.isArray(v)) for (const item of v) stack.push(item);
    else if (isObject(v)) {
      for (const [k, item] of Object.entries(v)) {
        weight += k.length;
        stack.push(item);
      }
    }
    if (weight > cap) return cap + 1;
  }
  return weight;
}

/**
 * Bound steps per millisecond of the deadline that a call may run without it: at a pessimistic
 * 100 ns a step (ajv's run tens of millions a second), an untimed call stays within a fifth of
 * the deadline.
 */
const UNTIMED_STEPS_PER_MS = 2_000;

/** Whether validating `data` against a schema of `fanout` may run untimed under a `validateMs` deadline. */
export function safeUntimed(fanout: number, data: unknown, validateMs: number): boolean {
  if (!Number.isFinite(fanout)) return false;
  const budget = validateMs * UNTIMED_STEPS_PER_MS;
  return fanout * dataWeight(data, Math.floor(budget / fanout)) <= budget;
}
