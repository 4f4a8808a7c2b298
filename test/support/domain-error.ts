import { DomainError } from '../../src/domain/common/errors.js';

/** Runs `fn`, expecting a DomainError, and returns it (anything else fails the test). */
export function domainErrorOf(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (e) {
    if (e instanceof DomainError) return e;
    throw e;
  }
  throw new Error('expected a DomainError');
}
