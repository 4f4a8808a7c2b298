import { describe, expect, it } from 'vitest';
import { parseConnectionCreate } from '../../src/domain/connection/connection.js';
import type { DomainError } from '../../src/domain/common/errors.js';
import { IncidentCreateSchema } from '../../src/domain/incident/incident.js';
import { parseInput } from '../../src/domain/common/validation.js';

const errorsOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return (e as DomainError).errors;
  }
  throw new Error('expected a validation error');
};

describe('field error codes', () => {
  it('tells a missing field (required) from a present one of the wrong type (invalid_type)', () => {
    const errors = errorsOf(() => parseInput(IncidentCreateSchema, { title: 5, template_ids: 'tpl_x' }));
    expect(errors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ field: 'title', code: 'invalid_type' }),
        expect.objectContaining({ field: 'template_ids', code: 'invalid_type' }),
        expect.objectContaining({ field: 'severity', code: 'required' }),
      ]),
    );
  });

  it('does the same inside a connection config', () => {
    const errors = errorsOf(() =>
      parseConnectionCreate({
        name: 'm',
        type: 'email',
        config: { host: 'smtp.example.com', port: '587', security: 'tls', to: ['a@example.com'] },
      }),
    );
    expect(errors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ field: 'config.port', code: 'invalid_type' }),
        expect.objectContaining({ field: 'config.from', code: 'required' }),
      ]),
    );
  });

  it('never copies the offending value into the error', () => {
    const errors = errorsOf(() =>
      parseInput(IncidentCreateSchema, { title: { secret: 'hunter2-value' }, severity: 'low' }),
    );
    expect(JSON.stringify(errors)).not.toContain('hunter2-value');
  });
});
