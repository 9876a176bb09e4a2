// Version 6: the model registry (engine/store/pg/model-registry.ts), shared by every node so that a
// model registered on one is served by all. A write takes a new generation from the sequence (nodes
// compare a loaded copy's generation with the row's) and notifies `svc_models` in its transaction.
export const V6_MODEL_REGISTRY = `
CREATE SEQUENCE model_generations;

CREATE TABLE model_registrations (
  model_name text PRIMARY KEY,
  uri text NOT NULL,
  registered_at timestamptz NOT NULL,
  generation bigint NOT NULL
);
`;
