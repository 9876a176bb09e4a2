// A read MLeap bundle (json format) and the views of it that ops compile from.
//
//   bundle.json                    {"uid","name","timestamp","format":"json","version"[,"meta"]}
//   root/model.json                {"op":"pipeline","attributes":{...}}
//   root/node.json                 {"name":"...","shape":{"inputs":[],"outputs":[]}}
//   root/<stage>.node/model.json   a pipeline stage (with node.json)
//   root/<rf>.node/tree0/model.json + tree.json   a child model of an ensemble (no node.json)

import { bundleError } from '../errors.js';
import { Attributes } from './attributes.js';

export interface BundleInfo {
  uid: string;
  name: string;
  format: string;
  version: string;
  timestamp: string;
  meta?: unknown;
}

/** Everything an op needs from a bundle: its info and its text files by relative path. Plain data, so it crosses to workers. */
export interface BundleDoc {
  info: BundleInfo;
  files: Record<string, string>;
}

export interface Socket {
  name: string;
  port: string;
}

/** A model folder: `model.json` and any files beside it. */
export class ModelSpec {
  readonly op: string;
  readonly attrs: Attributes;

  constructor(
    protected readonly doc: BundleDoc,
    /** Folder path inside the bundle, e.g. `root/rfc.node/tree0`. */
    readonly path: string,
  ) {
    const model = parseJson(doc, `${path}/model.json`) as { op?: unknown; attributes?: unknown };
    if (typeof model.op !== 'string' || model.op === '') throw bundleError(`${path}/model.json has no "op"`);
    this.op = model.op;
    const attributes = model.attributes ?? {};
    if (typeof attributes !== 'object' || Array.isArray(attributes)) {
      throw bundleError(`${path}/model.json: "attributes" is not an object`);
    }
    this.attrs = new Attributes(attributes as Record<string, unknown>, path);
  }

  /** A nested model folder without node.json (trees of an ensemble). */
  child(name: string): ModelSpec {
    return new ModelSpec(this.doc, `${this.path}/${name}`);
  }

  /** A pipeline stage folder `<name>.node`. */
  node(name: string): NodeSpec {
    return new NodeSpec(this.doc, `${this.path}/${name}.node`);
  }

  /** Another file of this folder, e.g. `tree.json`. */
  text(file: string): string {
    const text = this.doc.files[`${this.path}/${file}`];
    if (text === undefined) throw bundleError(`${this.path}/${file} is missing from the bundle`);
    return text;
  }
}

/** A stage: model.json plus node.json (its name and the columns bound to its ports). */
export class NodeSpec extends ModelSpec {
  readonly name: string;
  readonly inputs: Socket[];
  readonly outputs: Socket[];

  constructor(doc: BundleDoc, path: string) {
    super(doc, path);
    const node = parseJson(doc, `${path}/node.json`) as { name?: unknown; shape?: { inputs?: unknown; outputs?: unknown } };
    if (typeof node.name !== 'string') throw bundleError(`${path}/node.json has no "name"`);
    this.name = node.name;
    this.inputs = sockets(path, node.shape?.inputs);
    this.outputs = sockets(path, node.shape?.outputs);
  }

  /** The input socket bound to `port`, if any. */
  input(port: string): Socket | undefined {
    return this.inputs.find((s) => s.port === port);
  }

  output(port: string): Socket | undefined {
    return this.outputs.find((s) => s.port === port);
  }
}

export function rootNode(doc: BundleDoc): NodeSpec {
  return new NodeSpec(doc, 'root');
}

function sockets(path: string, raw: unknown): Socket[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) throw bundleError(`${path}/node.json: shape ports are not a list`);
  return raw.map((s: { name?: unknown; port?: unknown }) => {
    if (typeof s?.name !== 'string' || typeof s.port !== 'string') {
      throw bundleError(`${path}/node.json: a socket lacks "name" or "port"`);
    }
    return { name: s.name, port: s.port };
  });
}

function parseJson(doc: BundleDoc, file: string): unknown {
  const text = doc.files[file];
  if (text === undefined) throw bundleError(`${file} is missing from the bundle`);
  try {
    return JSON.parse(text);
  } catch {
    throw bundleError(`${file} is not valid JSON`);
  }
}
