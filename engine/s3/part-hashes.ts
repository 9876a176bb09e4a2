// The whole object's SHA-256 of a multipart upload (its blob id), advanced as the parts become
// contiguous from part 1 (decisions §5: Complete does little more than what is left of it).
//
// The hash's state after part i is a "mark", kept in the units store beside the upload
// (s3_part_hash_marks [uploadId, i]), so a restart or another pg-s3 node goes on from it. A mark
// names the parts it covers by a chain digest (chain_i = SHA-256(chain_{i-1} "\n" blobId_i)): a
// mark is a pure function of the parts' contents, so one made before a part was replaced (or
// for a part list that Complete does not name) never matches and is never wrong, only unused.
// A part that streams when every part before it is hashed is hashed as it streams (`before`,
// `keep`); one that came early is read back from its blocks once the parts before it are in
// (`advance`, after each part, in the background); Complete reads only what no mark covers.
// On one node the steps of one upload run one after another; two nodes advancing the same
// upload write the same marks (wasted work, never a wrong one).

import { createHash } from 'node:crypto';
import { xxh64 } from '@node-rs/xxhash';
import { S3_MAX_PARTS } from '../base/limits.js';
import { ingestFailed } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import { type UnitStore, table } from '../store/index.js';
import { PARTS, type PartContent } from './records.js';
import { type RunningSha256, type SavedSha256, loadRunningSha256, newRunningSha256 } from './running-sha256.js';

interface HashMark extends SavedSha256 {
  /** The chain digest of the parts 1..i it covers. */
  chain: string;
  /** Bytes hashed: the parts' sizes summed. */
  bytes: number;
}

const MARKS = table<HashMark, [string, number]>('s3_part_hash_marks');

const CHAIN_START = '';
/** The chain digest after a part of content `blobId`. */
export const chainAfter = (previous: string, blobId: string) => createHash('sha256').update(previous).update('\n').update(blobId).digest('hex');

/** A hash at a part's start: where it stands, to be continued by the part's bytes. */
export interface HashAtPart {
  hash: RunningSha256;
  chain: string;
  bytes: number;
}

export interface PartHashesDeps {
  units: UnitStore;
  /** A block's bytes from the block store (the test counts them). */
  readBlock(hex: string, size: number): Promise<Uint8Array>;
  log: Logger;
}

export class PartHashes {
  /** By upload id: the step running now; the next one waits for it. */
  private readonly steps = new Map<string, Promise<unknown>>();

  constructor(private readonly deps: PartHashesDeps) {}

  /**
   * For part `partNumber` about to stream: the hash at its start when parts 1..partNumber-1 are
   * all uploaded and hashed (its bytes then go into it as they come), else undefined.
   */
  async before(uploadId: string, partNumber: number, contents: ReadonlyMap<number, PartContent>): Promise<HashAtPart | undefined> {
    if (partNumber === 1) return { hash: await newRunningSha256(), chain: CHAIN_START, bytes: 0 };
    const prefix: PartContent[] = [];
    for (let n = 1; n < partNumber; n++) {
      const content = contents.get(n);
      if (!content) return undefined;
      prefix.push(content);
    }
    const { through, mark } = await this.frontier(uploadId, prefix);
    if (through !== partNumber - 1 || !mark) return undefined;
    const hash = await loadRunningSha256(mark);
    return hash && { hash, chain: mark.chain, bytes: mark.bytes };
  }

  /** Part `partNumber` (content `content`) went into `at` as it streamed: its mark, while the part is still on record. */
  async keep(uploadId: string, partNumber: number, content: PartContent, at: HashAtPart): Promise<void> {
    await this.putMark(uploadId, partNumber, content, { ...at.hash.save(), chain: chainAfter(at.chain, content.blobId), bytes: at.bytes + content.size });
  }

  /** Hashes the parts that became contiguous (read back from their blocks), in the background of the part that made them so. */
  advance(uploadId: string): Promise<void> {
    return this.serial(uploadId, async () => {
      const entries = await this.deps.units.range(PARTS, { start: [uploadId, 1], end: [uploadId, S3_MAX_PARTS + 1] });
      const contents: PartContent[] = [];
      for (const { key: [, n], value } of entries) {
        if (n !== contents.length + 1) break;
        contents.push(value.content);
      }
      const from = await this.resume(uploadId, contents);
      let { hash, chain, bytes } = from.at;
      for (let i = from.through; i < contents.length; i++) {
        const content = contents[i]!;
        await this.hashBlocks(hash, content);
        chain = chainAfter(chain, content.blobId);
        bytes += content.size;
        // A part replaced or an upload gone meanwhile: stop (the next advance starts from what holds).
        if (!(await this.putMark(uploadId, i + 1, content, { ...hash.save(), chain, bytes }))) return;
      }
    });
  }

  /**
   * Complete's digest of the listed parts' contents, in order: from the furthest mark that covers
   * a prefix of them (after any advance running on this node), the rest read from their blocks.
   * `partsRead`: how many parts had to be read.
   */
  digest(uploadId: string, listed: ReadonlyArray<{ partNumber: number; content: PartContent }>): Promise<{ hex: string; partsRead: number }> {
    return this.serial(uploadId, async () => {
      // Marks cover parts numbered from 1 without a gap: the listed prefix that is.
      let prefix = 0;
      while (prefix < listed.length && listed[prefix]!.partNumber === prefix + 1) prefix++;
      const contents = listed.map((p) => p.content);
      const from = await this.resume(uploadId, contents.slice(0, prefix));
      const { hash } = from.at;
      for (let i = from.through; i < contents.length; i++) await this.hashBlocks(hash, contents[i]!);
      return { hex: hash.hex(), partsRead: contents.length - from.through };
    });
  }

  /** The upload ended (completed, aborted, expired): its marks go. */
  async drop(uploadId: string): Promise<void> {
    await this.deps.units.run(async (unit) => {
      const marks = await unit.range(MARKS, { start: [uploadId, 0], end: [uploadId, S3_MAX_PARTS + 1], precondition: false });
      for (const { key } of marks) unit.remove(MARKS, key);
    });
  }

  /**
   * Where hashing `contents` (parts 1..n) goes on: the furthest matching mark (through n: nothing
   * left), or the start. A mark this process cannot load counts as lost.
   */
  private async resume(uploadId: string, contents: readonly PartContent[]): Promise<{ through: number; at: HashAtPart }> {
    const { through, mark } = await this.frontier(uploadId, contents);
    const hash = mark && (await loadRunningSha256(mark));
    if (mark && hash) return { through, at: { hash, chain: mark.chain, bytes: mark.bytes } };
    if (mark) this.deps.log.info('s3 multipart: a hash state of another implementation; recomputed from the blocks', { upload: uploadId, impl: mark.impl });
    return { through: 0, at: { hash: await newRunningSha256(), chain: CHAIN_START, bytes: 0 } };
  }

  /** The furthest mark whose chain is that of `contents`' prefix it covers. */
  private async frontier(uploadId: string, contents: readonly PartContent[]): Promise<{ through: number; mark?: HashMark }> {
    if (contents.length === 0) return { through: 0 };
    const marks = await this.deps.units.range(MARKS, { start: [uploadId, 1], end: [uploadId, contents.length + 1] });
    const byNumber = new Map(marks.map(({ key: [, n], value }) => [n, value]));
    let chain = CHAIN_START;
    let best: { through: number; mark?: HashMark } = { through: 0 };
    for (let i = 0; i < contents.length; i++) {
      chain = chainAfter(chain, contents[i]!.blobId);
      const mark = byNumber.get(i + 1);
      if (mark?.chain === chain) best = { through: i + 1, mark };
    }
    return best;
  }

  /** Writes mark `partNumber` if the part on record is still `content`; false when it is not (replaced, or the upload gone). */
  private putMark(uploadId: string, partNumber: number, content: PartContent, mark: HashMark): Promise<boolean> {
    return this.deps.units.run(async (unit) => {
      const part = await unit.get(PARTS, [uploadId, partNumber]);
      if (part?.content.blobId !== content.blobId) return false;
      unit.put(MARKS, [uploadId, partNumber], mark);
      return true;
    });
  }

  /** A part's bytes into `hash`, read from its blocks (each checked against its recorded xxh64). */
  private async hashBlocks(hash: RunningSha256, content: PartContent): Promise<void> {
    const blocks = content.blocks;
    if (!blocks) throw ingestFailed(`Part content ${content.blobId} has no blocks on record`);
    const count = blocks.sizes.length / 4;
    for (let i = 0; i < count; i++) {
      const hex = blocks.refs.toString('hex', i * 40, i * 40 + 32);
      const bytes = await this.deps.readBlock(hex, blocks.sizes.readUInt32LE(i * 4));
      if (xxh64(bytes) !== blocks.refs.readBigUInt64LE(i * 40 + 32)) throw ingestFailed(`Block ${hex} of a part does not match its checksum`);
      hash.update(bytes);
    }
  }

  /** Resolves once the upload's steps running on this node are done. */
  async idle(uploadId: string): Promise<void> {
    await this.steps.get(uploadId)?.catch(() => {});
  }

  /** Runs `step` after the upload's step running on this node, if any. */
  private serial<T>(uploadId: string, step: () => Promise<T>): Promise<T> {
    const previous = this.steps.get(uploadId) ?? Promise.resolve();
    const next = previous.catch(() => {}).then(step);
    this.steps.set(uploadId, next);
    void next.catch(() => {}).finally(() => {
      if (this.steps.get(uploadId) === next) this.steps.delete(uploadId);
    });
    return next;
  }
}
