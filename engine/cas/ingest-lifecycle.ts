// An ingest's stage moves only through moveIngest, so a step out of order (a success after a
// failure, an admission after an abort) throws where it happens instead of leaving an ingest
// half in two stages. A switch on two strings: no allocation, a few moves per upload.
//
//   admitting  → open, failed, aborted           waiting for its memory reservation (bytes go to the backlog)
//   open       → answered, settling, failed, aborted
//   answered   → open, settling, failed, aborted  a part answered early (ackPart); its pipeline still drains
//   settling   → succeeded, failed                its end decided: a manifest published, a part handed over
//   succeeded, failed, aborted: final
//
// answered → open is a resumable part's ingest going on with the session's next part
// (continuePart); answered → settling is its drain when none comes (endPart).

export type IngestStage = 'admitting' | 'open' | 'answered' | 'settling' | 'succeeded' | 'failed' | 'aborted';

/** A move the lifecycle does not have: a bug in the ingest's code, never a client's doing. */
export class IllegalIngestMove extends Error {
  constructor(
    readonly from: IngestStage,
    readonly to: IngestStage,
  ) {
    super(`ingest: no move from ${from} to ${to}`);
    this.name = 'IllegalIngestMove';
  }
}

/** `to`, when the lifecycle moves from `from` to it; else IllegalIngestMove. */
export function moveIngest(from: IngestStage, to: IngestStage): IngestStage {
  switch (from) {
    case 'admitting':
      if (to === 'open' || to === 'failed' || to === 'aborted') return to;
      break;
    case 'open':
      if (to === 'answered' || to === 'settling' || to === 'failed' || to === 'aborted') return to;
      break;
    case 'answered':
      if (to === 'open' || to === 'settling' || to === 'failed' || to === 'aborted') return to;
      break;
    case 'settling':
      if (to === 'succeeded' || to === 'failed') return to;
      break;
    default:
      break;
  }
  throw new IllegalIngestMove(from, to);
}
