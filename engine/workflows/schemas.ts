// The schemas of the workflows' derived entries (decisions.md, "Workflows"), registered at start.

import type { SchemaRegistration } from '../documents/commands.js';

export const OCR_SCHEMA = 'urn:svc:schema:ocr@1.0.0';
export const ENTITIES_SCHEMA = 'urn:svc:schema:entities@1.0.0';

const strings = { type: 'array', items: { type: 'string' } };

export const BUILT_IN_SCHEMAS: SchemaRegistration[] = [
  {
    schemaUrn: OCR_SCHEMA,
    namespaceUrn: 'urn:svc:ocr',
    lifecycle: 'published',
    jsonSchema: {
      type: 'object',
      required: ['text', 'language', 'pages'],
      additionalProperties: false,
      properties: {
        text: { type: 'string' },
        language: { type: 'string', pattern: '^[a-z]{3}$' },
        pages: {
          type: 'array',
          items: {
            type: 'object',
            required: ['number', 'source', 'characters'],
            additionalProperties: false,
            properties: {
              number: { type: 'integer', minimum: 1 },
              source: { enum: ['text-layer', 'ocr'] },
              characters: { type: 'integer', minimum: 0 },
              confidence: { type: 'number', minimum: 0, maximum: 1 },
            },
          },
        },
      },
    },
  },
  {
    schemaUrn: ENTITIES_SCHEMA,
    namespaceUrn: 'urn:svc:entities',
    lifecycle: 'published',
    jsonSchema: {
      type: 'object',
      required: ['people', 'orgs', 'places', 'dates', 'emails', 'phones'],
      additionalProperties: false,
      properties: { people: strings, orgs: strings, places: strings, dates: strings, emails: strings, phones: strings },
    },
  },
];
