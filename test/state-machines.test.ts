// The two state machines, move by move: every legal move gives its stage or record, every other
// move throws (engine/uploads/session-machine.ts, engine/cas/ingest-lifecycle.ts).
import { describe, expect, it } from 'vitest';
import { IllegalIngestMove, type IngestStage, moveIngest } from '../dist/engine/cas/ingest-lifecycle.js';
import type { LeaseKind, LeaseOf, SessionRecord, SessionState } from '../dist/engine/store/upload-catalog.js';
import { IllegalSessionMove, type SessionEvent, moveSession } from '../dist/engine/uploads/session-machine.js';

const NOW = 1_700_000_000_000;
const lease = <K extends LeaseKind>(kind: K): LeaseOf<K> => ({ kind, owner: 'node/process', token: `${kind}-token`, until: NOW + 60_000 });

/** A session in `state`, as the service leaves one there. */
function session(state: SessionState): SessionRecord {
  const base = { id: 's1', tenant: 't', state: 'Open' as const, offset: 10, partCount: 1, createdAt: NOW, expiresAt: NOW + 1000, tailStart: 4, tail: 'tail-a' };
  switch (state) {
    case 'Open': return base;
    case 'Committing': return { ...base, state, lease: lease('commit'), pendingBlob: 'blob-x' };
    case 'Committed': return { ...base, state, committedBlob: 'blob-x' };
    case 'Cancelled':
    case 'Expired': return { ...base, state };
  }
}

const EVENTS: Record<SessionEvent['type'] | 'take-commit', SessionEvent> = {
  create: { type: 'create', id: 's1', tenant: 't', declaredLength: 20, contentType: 'text/plain', now: NOW, ttlMs: 1000 },
  take: { type: 'take', lease: lease('part') },
  'take-commit': { type: 'take', lease: lease('commit') },
  renew: { type: 'renew', until: NOW + 99 },
  part: { type: 'part', length: 6, tailBytes: 2, tail: 'tail-b' },
  release: { type: 'release' },
  publishing: { type: 'publishing', blob: 'blob-y' },
  published: { type: 'published', blob: 'blob-y' },
  cancel: { type: 'cancel' },
  expire: { type: 'expire' },
  recover: { type: 'recover', blob: 'blob-x' },
  declare: { type: 'declare', length: 30 },
  concatenated: { type: 'concatenated', id: 's1', tenant: 't', length: 40, blob: 'blob-z', tus: { concat: ['p1', 'p2'] }, now: NOW, ttlMs: 1000 },
};

/** The legal session moves: from (none: no session yet), event → the state after. */
const SESSION_MOVES: Record<SessionState | 'none', Partial<Record<keyof typeof EVENTS, SessionState>>> = {
  none: { create: 'Open', concatenated: 'Committed' },
  Open: { take: 'Open', 'take-commit': 'Committing', renew: 'Open', part: 'Open', release: 'Open', cancel: 'Cancelled', expire: 'Expired', declare: 'Open' },
  Committing: { renew: 'Committing', release: 'Open', publishing: 'Committing', published: 'Committed', recover: 'Committed' },
  Committed: {},
  Cancelled: {},
  Expired: {},
};

const cases = Object.entries(SESSION_MOVES).flatMap(([from, legal]) =>
  (Object.keys(EVENTS) as Array<keyof typeof EVENTS>).map((event) => ({ from: from as SessionState | 'none', event, to: legal[event] })),
);

describe('session moves', () => {
  it('a length is declared once, and never below the bytes received', () => {
    const declared = moveSession(session('Open'), EVENTS.declare);
    expect(declared.declaredLength).toBe(30);
    expect(() => moveSession(declared, { type: 'declare', length: 30 })).toThrowError(IllegalSessionMove);
    expect(() => moveSession(session('Open'), { type: 'declare', length: 9 })).toThrowError(IllegalSessionMove);
  });

  it('a final concatenation is born Committed with its blob and length', () => {
    const final = moveSession(undefined, EVENTS.concatenated);
    expect([final.state, final.offset, final.declaredLength, final.committedBlob, final.tus]).toEqual(['Committed', 40, 40, 'blob-z', { concat: ['p1', 'p2'] }]);
  });

  it.each(cases.filter((c) => c.to !== undefined))('$from --$event--> $to', ({ from, event, to }) => {
    const record = from === 'none' ? undefined : session(from);
    expect(moveSession(record, EVENTS[event]).state).toBe(to);
  });

  it.each(cases.filter((c) => c.to === undefined))('$from --$event--> refused', ({ from, event }) => {
    const record = from === 'none' ? undefined : session(from);
    const move = () => moveSession(record, EVENTS[event]);
    expect(move).toThrowError(IllegalSessionMove);
    // The answer a client gets for a session that is not Open: 409 upload_state.
    expect(move).toThrowError(expect.objectContaining({ kind: 'conflict', code: 'upload_state', from: record?.state }));
  });

  it('refuses with the words of the checks before it', () => {
    expect(() => moveSession(session('Committed'), EVENTS.take)).toThrowError('The upload session is Committed: cannot add a part');
    expect(() => moveSession(session('Cancelled'), EVENTS['take-commit'])).toThrowError('The upload session is Cancelled: cannot commit');
    expect(() => moveSession(undefined, EVENTS.publishing)).toThrowError('The upload session is gone: cannot publish');
  });

  it('creates the initial record', () => {
    expect(moveSession(undefined, EVENTS.create)).toEqual({
      id: 's1', tenant: 't', state: 'Open', offset: 0, declaredLength: 20, partCount: 0, contentType: 'text/plain', createdAt: NOW, expiresAt: NOW + 1000, tailStart: 0,
    });
  });

  it('takes, renews and releases leases', () => {
    const part = moveSession(session('Open'), EVENTS.take);
    expect(part).toMatchObject({ state: 'Open', lease: lease('part') });
    expect(moveSession(part, EVENTS.renew).lease).toEqual({ ...lease('part'), until: NOW + 99 });
    expect(moveSession(part, EVENTS.release)).toMatchObject({ state: 'Open', lease: undefined });
    expect(moveSession(session('Open'), EVENTS['take-commit'])).toMatchObject({ state: 'Committing', lease: lease('commit') });
  });

  it('records a part: offset, count, tail, decision; the lease ends', () => {
    const decided = { spec: { kind: 'fixed', size: 4 } as const, mediaType: 'text/plain' };
    const leased = moveSession(session('Open'), EVENTS.take);
    expect(moveSession(leased, { ...(EVENTS.part as Extract<SessionEvent, { type: 'part' }>), decided })).toMatchObject({
      state: 'Open', offset: 16, partCount: 2, tailStart: 14, tail: 'tail-b', decided, lease: undefined,
    });
    // A part that decided nothing keeps the session's decision.
    expect(moveSession({ ...leased, decided }, EVENTS.part).decided).toBe(decided);
  });

  it('publishes, abandons and recovers commits', () => {
    const committing = session('Committing');
    expect(moveSession(committing, EVENTS.publishing)).toMatchObject({ state: 'Committing', pendingBlob: 'blob-y', lease: committing.lease });
    expect(moveSession(committing, EVENTS.published)).toMatchObject({ state: 'Committed', committedBlob: 'blob-y', pendingBlob: undefined, lease: undefined });
    expect(moveSession(committing, EVENTS.release)).toMatchObject({ state: 'Open', pendingBlob: undefined, lease: undefined });
    expect(moveSession(committing, EVENTS.recover)).toMatchObject({ state: 'Committed', committedBlob: 'blob-x', pendingBlob: undefined, lease: undefined });
    expect(moveSession(committing, { type: 'recover' })).toMatchObject({ state: 'Open', committedBlob: undefined, pendingBlob: undefined, lease: undefined });
  });

  it('ends sessions without their lease', () => {
    const leased = moveSession(session('Open'), EVENTS.take);
    expect(moveSession(leased, EVENTS.cancel)).toMatchObject({ state: 'Cancelled', lease: undefined });
    expect(moveSession(leased, EVENTS.expire)).toMatchObject({ state: 'Expired', lease: undefined });
  });

  it('leaves the record it moved from as it was', () => {
    const open = session('Open');
    const copy = structuredClone(open);
    moveSession(open, EVENTS['take-commit']);
    expect(open).toEqual(copy);
  });
});

const STAGES: IngestStage[] = ['admitting', 'open', 'answered', 'settling', 'succeeded', 'failed', 'aborted'];

/** The legal ingest moves. */
const INGEST_MOVES: Record<IngestStage, IngestStage[]> = {
  admitting: ['open', 'failed', 'aborted'],
  open: ['answered', 'settling', 'failed', 'aborted'],
  // A part answered early: continued by the next part (open), drained (settling), or ended.
  answered: ['open', 'settling', 'failed', 'aborted'],
  settling: ['succeeded', 'failed'],
  succeeded: [],
  failed: [],
  aborted: [],
};

const ingestCases = STAGES.flatMap((from) => STAGES.map((to) => ({ from, to, legal: INGEST_MOVES[from].includes(to) })));

describe('ingest moves', () => {
  it.each(ingestCases.filter((c) => c.legal))('$from → $to', ({ from, to }) => {
    expect(moveIngest(from, to)).toBe(to);
  });

  it.each(ingestCases.filter((c) => !c.legal))('$from → $to refused', ({ from, to }) => {
    expect(() => moveIngest(from, to)).toThrowError(IllegalIngestMove);
    expect(() => moveIngest(from, to)).toThrowError(expect.objectContaining({ from, to }));
  });
});
