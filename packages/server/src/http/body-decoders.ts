import { decodeExportRequest } from '../otlp/otlp-protobuf.js';
import { parseJson } from './json-body.js';
import type { DataPath } from './prototype-keys.js';

/** What turns a request body's bytes into its value. */
export type BodyDecoder = 'json' | 'otlp-protobuf';

/**
 * A body's bytes as its value; bytes that are not one are refused (FlightlogError, 400).
 * `dataPaths`: where JSON keeps prototype keys as data (see parseJson).
 */
export function decodeBody(
  bytes: Buffer,
  decoder: BodyDecoder = 'json',
  dataPaths: readonly DataPath[] = [],
): unknown {
  return decoder === 'otlp-protobuf' ? decodeExportRequest(bytes) : parseJson(bytes, dataPaths);
}
