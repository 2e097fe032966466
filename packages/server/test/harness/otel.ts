import { context, trace, type Span, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter as HttpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { send } from './http.js';

/**
 * The real OpenTelemetry JS SDK around a Flightlog server: spans are recorded by a tracer into
 * memory, then exported by the real OTLP/HTTP exporters (protobuf or JSON, gzip or not) in
 * whatever groups and order a test chooses, as many times as it likes (retries).
 */

export type OtlpEncoding = 'protobuf' | 'json';

export const OTLP_PATH = '/v1/otlp/v1/traces';

export interface ExporterOptions {
  encoding: OtlpEncoding;
  apiKey: string;
  gzip?: boolean;
  /** More headers on every export (as OTEL_EXPORTER_OTLP_HEADERS would add). */
  headers?: Record<string, string>;
}

/** A real OTLP/HTTP exporter aimed at `baseUrl`'s OTLP endpoint. */
export function otlpExporter(baseUrl: string, options: ExporterOptions): SpanExporter {
  const config = {
    url: baseUrl + OTLP_PATH,
    headers: { Authorization: `Bearer ${options.apiKey}`, ...options.headers },
    compression: (options.gzip ? 'gzip' : 'none') as never,
    timeoutMillis: 10_000,
  };
  return options.encoding === 'protobuf'
    ? new ProtobufExporter(config)
    : new HttpJsonExporter(config);
}

export interface ExportResult {
  ok: boolean;
  /** The HTTP status of a failed export, when it got one. */
  status: number | undefined;
  error: Error | undefined;
}

/** Exports `spans` once through `exporter` (the exporter itself retries 429/503). */
export function exportSpans(
  exporter: SpanExporter,
  spans: readonly ReadableSpan[],
): Promise<ExportResult> {
  return new Promise((resolve) =>
    exporter.export([...spans], (result) =>
      resolve({
        ok: result.code === 0, // ExportResultCode.SUCCESS
        status: (result.error as { code?: number } | undefined)?.code,
        error: result.error,
      }),
    ),
  );
}

/** A tracer whose ended spans are kept in memory until a test exports them. */
export function recordingTracer(serviceName = 'otel-test-agent'): {
  tracer: Tracer;
  finished(): ReadableSpan[];
  reset(): void;
} {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': serviceName }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
  });
  return {
    tracer: provider.getTracer('flightlog-otlp-test', '1.0.0'),
    finished: () => memory.getFinishedSpans(),
    reset: () => memory.reset(),
  };
}

/** Starts a span as a child of `parent` (the context is passed by hand: no context manager). */
export function childSpan(
  tracer: Tracer,
  parent: Span,
  name: string,
  attributes: Record<string, string | number | boolean | string[]> = {},
): Span {
  return tracer.startSpan(name, { attributes }, trace.setSpan(context.active(), parent));
}

/** A trace id as Flightlog stores it (the OTel trace id) and a span's event id. */
export const traceIdOf = (span: Span | ReadableSpan): string => spanContext(span).traceId;
export const eventIdOf = (span: Span | ReadableSpan): string =>
  `${spanContext(span).traceId}-${spanContext(span).spanId}`;

function spanContext(span: Span | ReadableSpan) {
  return 'spanContext' in span && typeof span.spanContext === 'function'
    ? span.spanContext()
    : (span as ReadableSpan).spanContext();
}

/** POST raw bytes to the OTLP endpoint (for bodies no exporter would send). */
export function postOtlp(
  baseUrl: string,
  apiKey: string | undefined,
  body: string | Buffer,
  contentType: string,
  options: { gzip?: boolean; headers?: Record<string, string> } = {},
) {
  return send(baseUrl, OTLP_PATH, body, {
    ...(apiKey === undefined ? {} : { token: apiKey }),
    headers: { 'content-type': contentType, ...options.headers },
    ...(options.gzip ? { gzip: true } : {}),
  });
}
