export * from './date-time.js';
export * from './primitives.js';
export * from './trace.js';
export * from './event.js';
export * from './batch.js';
export * from './complete.js';
export * from './payloads.js';
export * from './problem.js';
