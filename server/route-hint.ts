// "Did you mean": the route of a table closest to a request no route took, for its 404 message
// (`No route for POST /api/v1/blob; did you mean POST /api/v1/blobs?`). A route's pattern is
// compared with the path after its parameters (`:id`, a trailing `*`) are filled with the
// request's own segments, so only the fixed parts count; the distance is Levenshtein's, bounded
// (a path longer than ROUTE_HINT_MAX_PATH_CHARS gets no hint; a comparison stops once past the
// bound), and a route of another method costs one edit more.

import { ROUTE_HINT_MAX_EDITS, ROUTE_HINT_MAX_PATH_CHARS } from '../engine/base/limits.js';

export interface RouteEntry {
  method: string;
  pattern: string;
}

/** `; did you mean METHOD /path/{param}?` for the closest route, or '' when none is close. */
export function routeHint(routes: Iterable<RouteEntry>, method: string, path: string): string {
  const best = closestRoute(routes, method.toUpperCase(), path);
  return best ? `; did you mean ${best.method} ${displayed(best.pattern)}?` : '';
}

export function closestRoute(routes: Iterable<RouteEntry>, method: string, path: string): RouteEntry | undefined {
  if (path.length > ROUTE_HINT_MAX_PATH_CHARS) return undefined;
  const segments = path.split('/');
  let best: RouteEntry | undefined;
  let bestCost = Infinity;
  for (const route of routes) {
    const extra = route.method === method ? 0 : 1;
    // Within a quarter of the route's fixed characters: `/ops/{path}` is not a hint for `/api/…`.
    const bound = Math.min(ROUTE_HINT_MAX_EDITS, Math.max(1, Math.floor(fixedLength(route.pattern) / 4)), bestCost) - extra;
    if (bound < 0) continue;
    const distance = boundedDistance(path, filled(route.pattern, segments), bound);
    if (distance > bound) continue;
    const cost = extra + distance;
    // Ties go to the route of the request's method, then to the first registered.
    if (cost < bestCost || (best !== undefined && best.method !== method && route.method === method)) {
      best = route;
      bestCost = cost;
    }
  }
  return best;
}

/** The characters of a pattern that are not parameters. */
function fixedLength(pattern: string): number {
  return pattern.replace(/:[^/]*/g, '').replace(/\*$/, '').length;
}

/** The pattern with each parameter segment replaced by the request's segment at its place. */
function filled(pattern: string, segments: string[]): string {
  const parts = pattern.split('/');
  return parts
    .map((part, i) => {
      if (part === '*' && i === parts.length - 1) return segments.slice(i).join('/');
      return part.startsWith(':') ? (segments[i] ?? part) : part;
    })
    .join('/');
}

/** How the API documents write a pattern: `:id` as `{id}`, a trailing `*` as `{path}`. */
function displayed(pattern: string): string {
  return pattern.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\/\*$/, '/{path}');
}

/** Levenshtein distance of `a` and `b`, or `max + 1` as soon as it is known to exceed `max`. */
export function boundedDistance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  let current = new Array<number>(b.length + 1);
  for (let i = 1; i <= a.length; i++) {
    current[0] = i;
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1]! + (a.charCodeAt(i - 1) === b.charCodeAt(j - 1) ? 0 : 1);
      current[j] = Math.min(substitution, previous[j]! + 1, current[j - 1]! + 1);
      if (current[j]! < rowMin) rowMin = current[j]!;
    }
    if (rowMin > max) return max + 1;
    [previous, current] = [current, previous];
  }
  return Math.min(previous[b.length]!, max + 1);
}
