import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  apiKeyMayApprove,
  applyAudiencePatch,
  approvalExpiryMs,
  AUDIENCE_KEY,
  AudienceCreateSchema,
  AudiencePatchSchema,
  newAudience,
  parseAudienceInput,
  SLACK_USER_ID,
  slackUserMayApprove,
  withoutConnection,
  type Audience,
} from '../../src/domain/audience/audience.js';
import { presentAudience } from '../../src/http/presenters/audience.js';
import { domainErrorOf } from '../support/domain-error.js';

const NOW = '2026-11-22T10:00:00.000Z';
const LATER = '2026-11-22T11:00:00.000Z';
const create = (input: Record<string, unknown>): Audience =>
  newAudience(
    'aud_1',
    parseAudienceInput(AudienceCreateSchema, { key: 'customers', name: 'Customers', ...input }),
    NOW,
  );
const patch = (a: Audience, input: Record<string, unknown>): Audience =>
  applyAudiencePatch(a, parseAudienceInput(AudiencePatchSchema, input), LATER);
const fail = domainErrorOf;
const fields = (f: () => unknown) => fail(f).errors.map((e) => `${e.field}:${e.code}`);

describe('creating an audience', () => {
  it('fills the defaults: internal, no connections or templates, no approval needed', () => {
    const a = create({});
    expect(a).toEqual({
      id: 'aud_1',
      key: 'customers',
      name: 'Customers',
      description: '',
      visibility: 'internal',
      connection_ids: [],
      template_ids: [],
      approval: { required: false, approvers: { slack_user_ids: [] }, four_eyes: true, expires_in: '2h' },
      created_at: NOW,
      updated_at: NOW,
      rev: 1,
    });
    expect(presentAudience(a)).not.toHaveProperty('rev');
  });

  it('keeps an approval with Slack approvers and API key scopes', () => {
    const a = create({
      visibility: 'external',
      approval: {
        required: true,
        approvers: { slack_user_ids: ['U024BE7LH', 'W0123ABCD'], api_key_scopes: ['incidents:execute'] },
        expires_in: '30m',
      },
    });
    expect(a.approval).toEqual({
      required: true,
      approvers: { slack_user_ids: ['U024BE7LH', 'W0123ABCD'], api_key_scopes: ['incidents:execute'] },
      four_eyes: true,
      expires_in: '30m',
    });
  });

  it('refuses keys that are not lower-case slugs, naming the field', () => {
    for (const key of ['', 'Customers', '-lead', 'with space', 'a'.repeat(64), 'ünï', 'a.b'])
      expect(
        fields(() => create({ key })),
        key,
      ).toEqual(['key:invalid_format']);
  });

  it('refuses a blank or multi-line name, unknown fields and a bad visibility', () => {
    expect(fields(() => create({ name: '  ' }))).toEqual(['name:required']);
    expect(fields(() => create({ name: 'a\nb' }))).toEqual(['name:control_character']);
    expect(fields(() => create({ colour: 'red' }))).toEqual(['colour:unknown_field']);
    expect(fields(() => create({ visibility: 'public' }))).toEqual(['visibility:invalid_value']);
  });

  it('names each repeated connection or template id', () => {
    const e = fail(() => create({ connection_ids: ['con_a', 'con_b', 'con_a'], template_ids: ['tpl_x', 'tpl_x'] }));
    expect(e.code).toBe('validation_failed');
    expect(e.errors.map((x) => `${x.field}:${x.code}`)).toEqual([
      'connection_ids.2:duplicate',
      'template_ids.1:duplicate',
    ]);
  });

  it('answers invalid_approver, naming each approver that is not a Slack user id', () => {
    const e = fail(() =>
      create({ approval: { required: true, approvers: { slack_user_ids: ['U024BE7LH', 'alice', 'u024be7lh'] } } }),
    );
    expect(e.code).toBe('invalid_approver');
    expect(e.errors.map((x) => x.field)).toEqual([
      'approval.approvers.slack_user_ids.1',
      'approval.approvers.slack_user_ids.2',
    ]);
  });

  it('answers validation_failed when a bad approver comes with other problems, naming all', () => {
    const e = fail(() => create({ key: 'Bad', approval: { approvers: { slack_user_ids: ['alice'] } } }));
    expect(e.code).toBe('validation_failed');
    expect(e.errors.map((x) => `${x.field}:${x.code}`)).toEqual([
      'key:invalid_format',
      'approval.approvers.slack_user_ids.0:invalid_approver',
    ]);
  });

  it('answers no_approvers for a required approval nobody could give', () => {
    const e = fail(() => create({ approval: { required: true } }));
    expect(e.code).toBe('no_approvers');
    expect(e.errors[0]?.field).toBe('approval.approvers');
    // Approvers without `required` are fine: the audience simply needs no approval yet.
    expect(create({ approval: { approvers: { slack_user_ids: ['U1AB'] } } }).approval.required).toBe(false);
    // API key scopes alone are approvers enough.
    expect(
      create({ approval: { required: true, approvers: { api_key_scopes: ['incidents:execute'] } } }).approval.required,
    ).toBe(true);
  });

  it('takes expires_in from 5m to 7d only', () => {
    for (const ok of ['5m', '30m', '2h', '1d', '7d', '168h'])
      expect(create({ approval: { expires_in: ok } }).approval.expires_in).toBe(ok);
    for (const bad of ['4m', '8d', '0m', '2w', '1.5h', ' 2h', ''])
      expect(
        fields(() => create({ approval: { expires_in: bad } })),
        bad,
      ).toHaveLength(1);
    expect(approvalExpiryMs('2h')).toBe(7_200_000);
    expect(approvalExpiryMs('soon')).toBeNaN();
  });

  it('refuses an empty or unknown api_key_scopes list', () => {
    expect(fields(() => create({ approval: { approvers: { api_key_scopes: [] } } }))).toEqual([
      'approval.approvers.api_key_scopes:too_few',
    ]);
    expect(fields(() => create({ approval: { approvers: { api_key_scopes: ['root'] } } }))).toEqual([
      'approval.approvers.api_key_scopes.0:invalid_value',
    ]);
  });
});

describe('property: keys and approvers', () => {
  const slug = fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,62}$/);

  it('accepts every slug as a key and keeps it exactly', () => {
    fc.assert(
      fc.property(slug, (key) => {
        expect(create({ key }).key).toBe(key);
      }),
    );
  });

  it('refuses every string that is not a slug, with one error on key', () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 80 }).filter((s) => !AUDIENCE_KEY.test(s)),
        (key) => {
          const e = fail(() => create({ key }));
          expect(e.code).toBe('validation_failed');
          expect(e.errors.map((x) => x.field)).toEqual(['key']);
        },
      ),
    );
  });

  it('takes a Slack user id exactly when it looks like one', () => {
    fc.assert(
      fc.property(fc.oneof(fc.stringMatching(/^[UW][A-Z0-9]{2,20}$/), fc.string({ maxLength: 30 })), (id) => {
        const attempt = () => create({ approval: { required: true, approvers: { slack_user_ids: [id] } } });
        if (SLACK_USER_ID.test(id)) expect(attempt().approval.approvers.slack_user_ids).toEqual([id]);
        else expect(['invalid_approver', 'validation_failed']).toContain(fail(attempt).code);
      }),
    );
  });
});

describe('patching an audience', () => {
  it('refuses any key, even the same one', () => {
    const a = create({});
    for (const key of ['customers', 'other']) {
      const e = fail(() => patch(a, { key }));
      expect(e.code).toBe('validation_failed');
      expect(e.errors).toEqual([expect.objectContaining({ field: 'key', code: 'immutable' })]);
    }
  });

  it('refuses an empty patch and is a no-op for a patch that changes nothing', () => {
    const a = create({});
    expect(fail(() => patch(a, {})).errors[0]?.code).toBe('empty_patch');
    expect(patch(a, { name: 'Customers' })).toBe(a);
  });

  it('makes a new revision with the time of the change', () => {
    const b = patch(create({}), { name: 'Clients', visibility: 'external' });
    expect(b).toMatchObject({ name: 'Clients', visibility: 'external', rev: 2, updated_at: LATER, created_at: NOW });
  });

  it('merges approval one level: approvers as a whole, other fields kept', () => {
    const a = create({
      approval: {
        required: true,
        approvers: { slack_user_ids: ['U1AB'], api_key_scopes: ['incidents:execute'] },
        four_eyes: false,
      },
    });
    const b = patch(a, { approval: { expires_in: '1d' } });
    expect(b.approval).toEqual({ ...a.approval, expires_in: '1d' });
    const c = patch(b, { approval: { approvers: { slack_user_ids: ['W2CD'] } } });
    expect(c.approval).toEqual({
      required: true,
      approvers: { slack_user_ids: ['W2CD'] },
      four_eyes: false,
      expires_in: '1d',
    });
  });

  it('answers no_approvers when a change leaves a required approval without approvers', () => {
    const a = create({});
    expect(fail(() => patch(a, { approval: { required: true } })).code).toBe('no_approvers');
    const b = patch(a, { approval: { required: true, approvers: { slack_user_ids: ['U1AB'] } } });
    expect(fail(() => patch(b, { approval: { approvers: { slack_user_ids: [] } } })).code).toBe('no_approvers');
  });
});

describe('who may approve', () => {
  const withScopes = (scopes?: string[]) =>
    create({
      approval: {
        required: true,
        approvers: { slack_user_ids: ['U1AB'], ...(scopes ? { api_key_scopes: scopes } : {}) },
      },
    });

  it('lets only the named Slack users approve', () => {
    const a = withScopes();
    expect(slackUserMayApprove(a, 'U1AB')).toBe(true);
    expect(slackUserMayApprove(a, 'U9ZZ')).toBe(false);
  });

  it('lets an API key approve only with approvals:write and one of the listed scopes', () => {
    expect(apiKeyMayApprove(withScopes(), ['*'])).toBe(false);
    const a = withScopes(['incidents:execute']);
    expect(apiKeyMayApprove(a, ['approvals:write', 'incidents:execute'])).toBe(true);
    expect(apiKeyMayApprove(a, ['*'])).toBe(true);
    expect(apiKeyMayApprove(a, ['incidents:execute'])).toBe(false);
    expect(apiKeyMayApprove(a, ['approvals:write', 'incidents:read'])).toBe(false);
  });
});

describe('a connection leaving', () => {
  it('drops the id with a new revision, and leaves an audience without it unchanged', () => {
    const a = create({ connection_ids: ['con_a', 'con_b'] });
    const b = withoutConnection(a, 'con_a', LATER);
    expect(b).toMatchObject({ connection_ids: ['con_b'], rev: 2, updated_at: LATER });
    expect(withoutConnection(b, 'con_a', LATER)).toBe(b);
  });
});
