import { describe, expect, it } from 'vitest';
import type { Audience } from '../../src/domain/audience/audience.js';
import { DomainError } from '../../src/domain/common/errors.js';
import type { Template } from '../../src/domain/template/template.js';
import { planAudiences, resolveAudienceKeys } from '../../src/services/audience-plan.js';
import type { ExecuteConnection } from '../../src/services/execution-plan.js';

const con = (id: string, enabled = true): ExecuteConnection => ({ id, type: 'webhook', enabled, config: {} });
const tpl = (id: string, connection_ids: string[] = []) => ({ id, connection_ids }) as unknown as Template;
const aud = (key: string, over: Partial<Audience> = {}): Audience => ({
  id: `aud_${key}`,
  key,
  name: key,
  description: '',
  visibility: 'internal',
  connection_ids: [],
  template_ids: [],
  approval: { required: false, approvers: { slack_user_ids: [] }, four_eyes: true, expires_in: '2h' },
  created_at: '',
  updated_at: '',
  rev: 1,
  ...over,
});
const pairsOf = (ps: { connection: { id: string }; template: { id: string } | null }[]) =>
  ps.map((p) => `${p.connection.id}×${p.template?.id ?? 'built-in'}`);

describe('planning an execute per audience', () => {
  const connections = [con('c1'), con('c2'), con('c3', false)];

  it('gives each audience its connections × the incident templates it lists, template targeting applied', () => {
    const plan = planAudiences(
      [
        aud('responders', { connection_ids: ['c1'] }),
        aud('customers', { connection_ids: ['c2'], template_ids: ['t2'] }),
      ],
      connections,
      [tpl('t1'), tpl('t2'), tpl('t3', ['c1'])],
    );
    expect(pairsOf(plan.parts[0]!.pairs)).toEqual(['c1×t1', 'c1×t2', 'c1×t3']);
    expect(pairsOf(plan.parts[1]!.pairs)).toEqual(['c2×t2']);
    expect(plan.pairs.map((p) => p.audience.key)).toEqual(['responders', 'responders', 'responders', 'customers']);
  });

  it('reports an audience that gets nothing, and refuses when none gets anything', () => {
    const plan = planAudiences(
      [
        aud('responders', { connection_ids: ['c1'] }),
        aud('off', { connection_ids: ['c3'] }),
        aud('picky', { connection_ids: ['c2'], template_ids: ['tX'] }),
      ],
      connections,
      [tpl('t1')],
    );
    expect(plan.parts.map((p) => p.skipped?.reason ?? null)).toEqual([null, 'no_connections', 'no_templates']);
    let err: unknown;
    try {
      planAudiences([aud('off', { connection_ids: ['c3'] })], connections, [tpl('t1')]);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).code).toBe('no_connections');
    expect((err as DomainError).errors[0]).toMatchObject({ field: 'audiences.0', code: 'no_connections' });
  });

  it('sends a pair reached through two audiences once, under the one that needs approval', () => {
    const held = aud('customers', {
      connection_ids: ['c1'],
      approval: { required: true, approvers: { slack_user_ids: ['U1'] }, four_eyes: true, expires_in: '2h' },
    });
    const plan = planAudiences([aud('responders', { connection_ids: ['c1', 'c2'] }), held], connections, []);
    expect(pairsOf(plan.pairs)).toEqual(['c2×built-in', 'c1×built-in']);
    expect(pairsOf(plan.parts[0]!.pairs)).toEqual(['c2×built-in']);
    expect(pairsOf(plan.parts[0]!.own)).toEqual(['c1×built-in', 'c2×built-in']);
    expect(pairsOf(plan.parts[1]!.pairs)).toEqual(['c1×built-in']);
  });

  it('names unknown audience keys by their index', () => {
    let err: unknown;
    try {
      resolveAudienceKeys(['responders', 'nope'], [aud('responders'), null]);
    } catch (e) {
      err = e;
    }
    expect((err as DomainError).code).toBe('unknown_audience');
    expect((err as DomainError).errors).toEqual([
      { field: 'audiences.1', code: 'unknown_audience', message: 'Audience nope does not exist.' },
    ]);
    expect(resolveAudienceKeys(['a', 'a'], [aud('a'), aud('a')]).map((a) => a.key)).toEqual(['a']);
  });
});
