/**
 * What services need from the world. Services import only these ports and the domain;
 * src/composition/ wires the Redis adapters (store/), the delivery machinery (delivery/,
 * channels/) and the edges in behind them.
 */
export type * from './crypto.js';
export type * from './delivery.js';
export type * from './edge.js';
export type * from './repos.js';
export type * from './subscribers.js';
