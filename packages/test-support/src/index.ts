export * from './child-node.js';
export * from './engines.js';
export * from './fake-llm-upstream.js';
export * from './litesvm-rpc.js';
export * from './paywalled-server.js';
export * from './provider-replies.js';
export * from './recording-logger.js';
export * from './llm-payload.js';
