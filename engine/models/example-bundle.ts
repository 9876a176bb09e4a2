// The example model `svc models example DIR` writes: a small MLeap bundle (JSON format, as a
// directory) made by the project itself, so a newcomer can try the model runtime at once.
// It predicts a flat's monthly rent from its area, rooms and city:
//   rent = 200 + 30·area + 50·rooms + 400·[city = paris] + 100·[city = lyon]
// as a Spark-style pipeline: string_indexer (city → index), one_hot_encoder (index → vector,
// the last city, nice, dropped), vector_assembler, linear_regression.

/** A leap frame of three flats, and the rents the model answers for them. */
export const EXAMPLE_FRAME = {
  schema: {
    fields: [
      { name: 'area', type: 'double' },
      { name: 'rooms', type: 'double' },
      { name: 'city', type: 'string' },
    ],
  },
  rows: [
    [50, 2, 'paris'],
    [35, 1, 'lyon'],
    [80, 3, 'nice'],
  ],
};
export const EXAMPLE_RENTS = [2200, 1400, 2750];

const strings = (v: string[]) => ({ type: 'list', string: v });
const scalarShape = { base: 'scalar', isNullable: false };
const vectorShape = (size: number) => ({ base: 'tensor', isNullable: false, tensorShape: { dimensions: [{ size, name: '' }] } });

interface Stage {
  name: string;
  op: string;
  attributes: Record<string, unknown>;
  inputs: [port: string, column: string][];
  outputs: [port: string, column: string][];
}

const STAGES: Stage[] = [
  {
    name: 'city_indexer',
    op: 'string_indexer',
    attributes: { labels: strings(['paris', 'lyon', 'nice']), handle_invalid: { string: 'error' } },
    inputs: [['input', 'city']],
    outputs: [['output', 'city_index']],
  },
  {
    name: 'city_encoder',
    op: 'one_hot_encoder',
    attributes: { category_sizes: { type: 'list', long: [3] }, drop_last: { boolean: true }, handle_invalid: { string: 'error' } },
    inputs: [['input0', 'city_index']],
    outputs: [['output0', 'city_vector']],
  },
  {
    name: 'assembler',
    op: 'vector_assembler',
    attributes: { input_shapes: { type: 'list', data_shape: [scalarShape, scalarShape, vectorShape(2)] } },
    inputs: [['input0', 'area'], ['input1', 'rooms'], ['input2', 'city_vector']],
    outputs: [['output', 'features']],
  },
  {
    name: 'rent_regression',
    op: 'linear_regression',
    attributes: {
      coefficients: { type: 'tensor', double: [30, 50, 400, 100], shape: { dimensions: [{ size: 4, name: '' }] } },
      intercept: { double: 200 },
    },
    inputs: [['features', 'features']],
    outputs: [['prediction', 'rent']],
  },
];

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

function stageFiles(path: string, stage: Stage): Record<string, string> {
  return {
    [`${path}/model.json`]: json({ op: stage.op, attributes: stage.attributes }),
    [`${path}/node.json`]: json({
      name: stage.name,
      shape: {
        inputs: stage.inputs.map(([port, name]) => ({ port, name })),
        outputs: stage.outputs.map(([port, name]) => ({ port, name })),
      },
    }),
  };
}

/** The bundle's files by relative path (bundle.json, root/…), each a JSON text. */
export function exampleBundleFiles(): Record<string, string> {
  const files: Record<string, string> = {
    'bundle.json': json({
      uid: '5e1f0c2a-4b7d-4e8a-9c3f-2d6b8a1e7f40',
      name: 'rent_pipeline',
      format: 'json',
      version: '0.20.0',
      timestamp: '2026-01-01T00:00:00.000',
    }),
    'root/model.json': json({ op: 'pipeline', attributes: { nodes: strings(STAGES.map((s) => s.name)) } }),
    'root/node.json': json({ name: 'rent_pipeline', shape: { inputs: [], outputs: [] } }),
  };
  for (const stage of STAGES) Object.assign(files, stageFiles(`root/${stage.name}.node`, stage));
  return files;
}
