// multi_layer_perceptron_classifier: Spark's feed-forward network. `layers` = sizes from
// input to output; `weights` holds, per layer, a [out, in] matrix (column-major) then the
// bias. Hidden layers apply the sigmoid; raw = the last affine output; probability =
// softmax(raw); prediction by argmax (or thresholds).

import type { NodeSpec } from '../../bundle/spec.js';
import { bundleError } from '../../errors.js';
import { dense, type Tensor } from '../../types.js';
import type { OpDefinition } from '../op.js';
import { compileClassifier } from './classifier.js';
import { gemv } from './vector.js';

interface AffineLayer {
  inputs: number;
  outputs: number;
  weights: Float64Array;
  bias: Float64Array;
}

export const multiLayerPerceptronClassifier: OpDefinition = {
  op: 'multi_layer_perceptron_classifier',
  className: 'MultiLayerPerceptronClassifier',
  compile(node: NodeSpec) {
    const sizes = node.attrs.integers('layers');
    const weights = node.attrs.doubles('weights');
    if (sizes.length < 2) throw bundleError(`${node.path}: a perceptron needs at least two layers`);
    const layers: AffineLayer[] = [];
    let offset = 0;
    for (let l = 0; l + 1 < sizes.length; l++) {
      const inputs = sizes[l]!;
      const outputs = sizes[l + 1]!;
      const w = Float64Array.from(weights.slice(offset, offset + inputs * outputs));
      offset += inputs * outputs;
      const bias = Float64Array.from(weights.slice(offset, offset + outputs));
      offset += outputs;
      layers.push({ inputs, outputs, weights: w, bias });
    }
    if (offset !== weights.length) throw bundleError(`${node.path}: ${weights.length} weights for layers [${sizes.join(', ')}]`);
    return compileClassifier(node, {
      numClasses: sizes[sizes.length - 1]!,
      numFeatures: sizes[0]!,
      thresholds: node.attrs.has('thresholds') ? Float64Array.from(node.attrs.doubles('thresholds')) : undefined,
      predictRaw(x: Tensor) {
        let input: Tensor = x;
        let output: number[] = [];
        for (let l = 0; l < layers.length; l++) {
          const layer = layers[l]!;
          output = new Array<number>(layer.outputs);
          gemv(layer.weights, layer.outputs, input, layer.bias, output);
          if (l + 1 < layers.length) {
            for (let i = 0; i < output.length; i++) output[i] = 1 / (1 + Math.exp(-output[i]!));
            input = dense(output);
          }
        }
        return output;
      },
      rawToProbabilityInPlace(values) {
        let max = -Number.MAX_VALUE;
        for (const v of values) if (v > max) max = v;
        let sum = 0;
        for (let i = 0; i < values.length; i++) {
          values[i] = Math.exp(values[i]! - max);
          sum += values[i]!;
        }
        for (let i = 0; i < values.length; i++) values[i] /= sum;
      },
    });
  },
};
