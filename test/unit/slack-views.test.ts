import { describe, expect, it } from 'vitest';
import { SCOPES, type ApiKey } from '../../src/domain/common/api-key.js';
import { DomainError } from '../../src/domain/common/errors.js';
import type { Incident } from '../../src/domain/incident/incident.js';
import { parseCommand } from '../../src/slack/listeners/commands.js';
import { blockFor, ephemeralMessage, modalErrors } from '../../src/slack/errors.js';
import { signSlackRequest, verifySlackRequest } from '../../src/slack/verify-request.js';
import { listOf, readViewState, selectedOf, textOf, variablesOf } from '../../src/slack/view-state.js';
import { decodeContext, encodeContext } from '../../src/slack/views/action-ids.js';
import { announcementMessage } from '../../src/slack/views/announcement.js';
import { apiKeyCreatedModal, generateApiKeyModal } from '../../src/slack/views/api-key-modals.js';
import { mergeDeclaredVariables } from '../../src/services/executions.js';
import { executeModal } from '../../src/slack/views/execute-modal.js';
import { helpMessage } from '../../src/slack/views/help.js';
import { homeView, type HomeConnection } from '../../src/slack/views/home.js';
import {
  closeIncidentModal,
  createIncidentModal,
  resolveIncidentModal,
  updateIncidentModal,
} from '../../src/slack/views/incident-modals.js';
import { incidentListMessage } from '../../src/slack/views/incident-list.js';
import { anIncident } from '../support/factories.js';

const incident = (over: Partial<Incident> = {}): Incident =>
  anIncident({
    id: 'inc_01JABCDEFGHJKMNPQRSTVWXYZ0',
    title: 'Checkout down',
    description: 'Payments time out',
    impact: 'EU customers',
    created_by: { type: 'slack_user', id: 'UALICE', name: 'alice' },
    ...over,
  });

const inputs = (view: { blocks: any[] }) => view.blocks.filter((b) => b.type === 'input');
const inputIds = (view: { blocks: any[] }) => inputs(view).map((b) => b.block_id);
const textOf_ = (x: unknown) => JSON.stringify(x);

describe('parseCommand', () => {
  it('reads every sub-command', () => {
    expect(parseCommand('')).toEqual({ kind: 'help' });
    expect(parseCommand('  HELP ')).toEqual({ kind: 'help' });
    expect(parseCommand('new')).toEqual({ kind: 'new', title: '' });
    expect(parseCommand('new  Checkout is   down ')).toEqual({ kind: 'new', title: 'Checkout is   down' });
    expect(parseCommand('list')).toEqual({ kind: 'list' });
    for (const k of ['show', 'execute', 'update', 'resolve', 'close'] as const) {
      expect(parseCommand(`${k} inc_1`)).toEqual({ kind: k, id: 'inc_1' });
      expect(parseCommand(k)).toEqual({ kind: k, id: null });
    }
    expect(parseCommand('explode now')).toEqual({ kind: 'unknown', word: 'explode' });
  });
});

describe('verifySlackRequest', () => {
  const secret = 's3cret';
  const now = 1_800_000_000_000;
  const ts = String(now / 1000);
  const body = 'command=%2Fincident&text=help';
  const ok = (over: Partial<Parameters<typeof verifySlackRequest>[0]> = {}) =>
    verifySlackRequest({
      signingSecret: secret,
      timestamp: ts,
      signature: signSlackRequest(secret, Number(ts), body),
      rawBody: body,
      nowMs: now,
      ...over,
    });

  it('accepts a correct signature within five minutes either way', () => {
    expect(ok()).toEqual({ ok: true });
    const at = (skew: number) =>
      ok({ timestamp: String(now / 1000 + skew), signature: signSlackRequest(secret, now / 1000 + skew, body) });
    expect(at(-300)).toEqual({ ok: true });
    expect(at(300)).toEqual({ ok: true });
    expect(at(-301)).toEqual({ ok: false, reason: 'stale_timestamp' });
    expect(at(301)).toEqual({ ok: false, reason: 'future_timestamp' });
  });

  it('refuses forged, tampered and malformed requests', () => {
    expect(ok({ signature: signSlackRequest('other', Number(ts), body) })).toEqual({
      ok: false,
      reason: 'bad_signature',
    });
    expect(ok({ rawBody: `${body}&x=1` })).toEqual({ ok: false, reason: 'bad_signature' });
    expect(ok({ signature: 'v0=abc' })).toEqual({ ok: false, reason: 'bad_signature' });
    expect(ok({ signature: undefined })).toEqual({ ok: false, reason: 'missing_headers' });
    expect(ok({ timestamp: 'soon' })).toEqual({ ok: false, reason: 'bad_timestamp' });
  });
});

describe('slack/errors', () => {
  it('maps field paths to the nearest block', () => {
    const blocks = ['title', 'template_ids', 'variables.eta'];
    expect(blockFor('title', blocks)).toBe('title');
    expect(blockFor('template_ids.3', blocks)).toBe('template_ids');
    expect(blockFor('variables.eta', blocks)).toBe('variables.eta');
    expect(blockFor('variables.other', blocks)).toBeNull();
    expect(blockFor('', blocks)).toBeNull();
  });

  it('puts each field error on its input and the rest on the fallback', () => {
    const err = new DomainError('missing_variables', 'Missing.', [
      { field: 'variables.eta', code: 'required', message: 'eta is required.' },
      { field: 'variables.gone', code: 'required', message: 'gone is required.' },
    ]);
    expect(modalErrors(err, ['variables.eta', 'variables.owner'], 'variables.eta')).toEqual({
      'variables.eta': 'eta is required. gone is required.',
    });
    const closed = new DomainError('incident_closed', 'Incident x is closed.');
    expect(modalErrors(closed, ['status'], 'status')).toEqual({ status: expect.stringMatching(/closed/) });
    expect(modalErrors(new Error('boom at 0x1234'), ['title'], 'title').title).not.toContain('0x1234');
  });

  it('has a friendly line for every error, and hides internals', () => {
    expect(ephemeralMessage(new DomainError('not_found', 'Incident inc_x was not found.'))).toMatch(
      /inc_x was not found.*list/,
    );
    expect(ephemeralMessage(new DomainError('no_connections', 'x'))).toMatch(/no enabled connection/);
    expect(ephemeralMessage(new TypeError('secret stack detail'))).not.toContain('secret');
  });
});

describe('view state', () => {
  const values = {
    title: { value: { type: 'plain_text_input', value: 'Down' } },
    severity: { value: { type: 'static_select', selected_option: { value: 'major' } } },
    template_ids: {
      value: { type: 'multi_static_select', selected_options: [{ value: 'tpl_a' }, { value: 'tpl_b' }] },
    },
    'variables.eta': { value: { type: 'plain_text_input', value: '10 min' } },
    'variables.blank': { value: { type: 'plain_text_input', value: '  ' } },
    'variables.none': { value: { type: 'plain_text_input', value: null } },
    junk: 'not an object',
  };

  it('reads text, selects and multi-selects, and variables', () => {
    const s = readViewState(values);
    expect(textOf(s, 'title')).toBe('Down');
    expect(textOf(s, 'missing')).toBe('');
    expect(selectedOf(s, 'severity')).toBe('major');
    expect(listOf(s, 'template_ids')).toEqual(['tpl_a', 'tpl_b']);
    expect(variablesOf(s)).toEqual({ eta: '10 min' });
    expect(readViewState(null).size).toBe(0);
  });

  it('round-trips modal context and distrusts forged metadata', () => {
    expect(decodeContext(encodeContext({ incident_id: 'inc_1', channel_id: 'C1' }))).toEqual({
      incident_id: 'inc_1',
      channel_id: 'C1',
    });
    expect(decodeContext('{"incident_id": 5}')).toEqual({});
    expect(decodeContext('not json')).toEqual({});
    expect(decodeContext(undefined)).toEqual({});
  });
});

describe('incident modals', () => {
  it('create: the /v1 fields as block ids, title pre-filled, templates to choose', () => {
    const v = createIncidentModal({
      title: 'Down',
      templates: [{ id: 'tpl_1', name: 'Status page' }],
      ctx: { channel_id: 'C1' },
    });
    expect(v.callback_id).toBe('incident_create');
    expect(inputIds(v)).toEqual(['title', 'severity', 'impact', 'description', 'template_ids']);
    const title = inputs(v)[0];
    expect(title.element).toMatchObject({ initial_value: 'Down', max_length: 200 });
    expect(title.optional).toBe(false);
    expect(inputs(v)[1].element.options.map((o: any) => o.value)).toEqual(['critical', 'major', 'minor', 'low']);
    expect(inputs(v)[4].element.options).toEqual([expect.objectContaining({ value: 'tpl_1' })]);
    expect(JSON.parse(v.private_metadata!)).toEqual({ channel_id: 'C1' });
    // A typed title longer than a title may be is shortened to whole characters, and says so.
    const long = inputs(createIncidentModal({ title: `a${'🔥'.repeat(150)}`, templates: [], ctx: {} }))[0];
    expect(long.element.initial_value).toBe(`a${'🔥'.repeat(99)}`);
    expect(long.hint.text).toContain('Shortened to 200 characters');
    const none = createIncidentModal({ templates: [], ctx: {} });
    expect(inputIds(none)).not.toContain('template_ids');
    expect(textOf_(none)).toContain('No templates yet');
  });

  it('update: current values selected; oversized text is left to the API', () => {
    const v = updateIncidentModal({
      incident: incident({ status: 'monitoring', template_ids: ['tpl_1'], description: 'x'.repeat(5000) }),
      templates: [
        { id: 'tpl_1', name: 'A' },
        { id: 'tpl_2', name: 'B' },
      ],
    });
    const byId = Object.fromEntries(inputs(v).map((b) => [b.block_id, b]));
    expect(byId.status.element.initial_option.value).toBe('monitoring');
    expect(byId.status.element.options.map((o: any) => o.value)).toEqual([
      'investigating',
      'identified',
      'monitoring',
      'resolved',
    ]);
    expect(byId.severity.element.initial_option.value).toBe('major');
    expect(byId.template_ids.element.initial_options.map((o: any) => o.value)).toEqual(['tpl_1']);
    expect(byId.description).toBeUndefined();
    expect(textOf_(v)).toContain('edit it over the API');
  });

  it('resolve asks for a summary; close confirms', () => {
    const r = resolveIncidentModal(incident());
    expect(inputs(r).map((b) => [b.block_id, b.optional])).toEqual([['resolution_summary', false]]);
    const c = closeIncidentModal(incident());
    expect(c.submit).toMatchObject({ text: 'Close incident' });
    expect(inputs(c).map((b) => [b.block_id, b.optional])).toEqual([['resolution_summary', true]]);
    expect(JSON.parse(c.private_metadata!)).toEqual({ incident_id: incident().id });
  });
});

describe('execute modal', () => {
  const vars = [
    { name: 'eta', description: 'When it is fixed', required: true, default: null },
    { name: 'owner', description: '', required: true, default: 'sre' },
    { name: 'note', description: '', required: false, default: null },
  ];

  it('one input per variable: required ones required, defaults pre-filled, a preview per delivery', () => {
    const v = executeModal({
      incident: incident(),
      variables: vars,
      previews: [
        {
          connectionName: 'Ops Slack',
          connectionType: 'slack',
          templateName: 'Status',
          subject: '',
          body: 'Checkout down ‹eta›',
        },
      ],
    });
    const byId = Object.fromEntries(inputs(v).map((b) => [b.block_id, b]));
    expect(Object.keys(byId)).toEqual(['variables.eta', 'variables.owner', 'variables.note']);
    expect(byId['variables.eta'].optional).toBe(false);
    expect(byId['variables.eta'].hint.text).toBe('When it is fixed');
    expect(byId['variables.owner'].element.initial_value).toBe('sre');
    expect(byId['variables.note'].optional).toBe(true);
    expect(textOf_(v)).toContain('Ops Slack');
    expect(textOf_(v)).toContain('Checkout down ‹eta›');
  });

  it('stays within 100 blocks with 50 variables and many deliveries', () => {
    const many = Array.from({ length: 50 }, (_, i) => ({
      name: `v${i}`,
      description: '',
      required: true,
      default: null,
    }));
    const previews = Array.from({ length: 40 }, (_, i) => ({
      connectionName: `c${i}`,
      connectionType: 'webhook',
      templateName: null,
      subject: 's',
      body: 'b'.repeat(5000),
    }));
    const v = executeModal({ incident: incident(), variables: many, previews });
    expect(v.blocks.length).toBeLessThanOrEqual(100);
    expect(inputs(v)).toHaveLength(50);
    expect(textOf_(v)).toMatch(/and \d+ more deliveries/);
    for (const b of v.blocks as any[]) if (b.type === 'section') expect(b.text.text.length).toBeLessThanOrEqual(3000);
  });

  // The merge is ExecutionService's (prepare); the preview markers are asserted through prepare
  // in test/service/executions.test.ts ('merges the variables … previews with markers').
  it('merges variables across templates', () => {
    const merged = mergeDeclaredVariables([
      [{ name: 'eta', description: '', required: false, default: null }],
      [
        { name: 'eta', description: 'ETA', required: true, default: '1h' },
        { name: 'x', description: '', required: false, default: null },
      ],
    ]);
    expect(merged).toEqual([
      { name: 'eta', description: 'ETA', required: true, default: '1h' },
      { name: 'x', description: '', required: false, default: null },
    ]);
  });
});

describe('announcement', () => {
  it('shows the facts escaped and the buttons that fit the state', () => {
    const open = announcementMessage(incident({ title: '<!channel> *Checkout*' }), null);
    expect(textOf_(open.blocks)).not.toContain('<!channel>');
    expect(open.text).toContain('[MAJOR]');
    const actions = (s: Incident['status']) =>
      (
        announcementMessage(incident({ status: s }), null).blocks.find((b: any) => b.type === 'actions') as any
      )?.elements.map((e: any) => e.action_id);
    expect(actions('investigating')).toEqual([
      'incident_execute',
      'incident_update',
      'incident_resolve',
      'incident_close',
    ]);
    expect(actions('resolved')).toEqual(['incident_execute', 'incident_update', 'incident_close']);
    expect(actions('closed')).toBeUndefined();
  });

  it('adds a receipt line per delivery', () => {
    const m = announcementMessage(incident(), {
      executionId: 'exe_1',
      status: 'in_progress',
      lines: [
        { connectionName: 'Ops', connectionType: 'slack', status: 'delivered', attempts: 1, error: null },
        { connectionName: 'Hook', connectionType: 'webhook', status: 'retrying', attempts: 2, error: 'HTTP 503' },
        { connectionName: 'Mail', connectionType: 'email', status: 'failed', attempts: 8, error: '550 no such user' },
      ],
    });
    const receipts = textOf_(m.blocks.find((b: any) => b.block_id === 'receipts'));
    expect(receipts).toMatch(/delivered — \*Ops\* \(slack\)/);
    expect(receipts).toMatch(/retrying — \*Hook\* \(webhook\) · attempt 2 · HTTP 503/);
    expect(receipts).toMatch(/failed — \*Mail\* \(email\) · 550 no such user/);
  });
});

describe('App Home', () => {
  const conn = (i: number): HomeConnection => ({
    id: `con_${i}`,
    name: `Conn ${i}`,
    type: 'webhook',
    enabled: true,
    health: { state: 'ok', consecutive_failures: 0, last_error: null, disabled_reason: null },
    last_test: { ok: true, status: 'ok', checked_at: '2026-11-22T10:00:00.000Z', latency_ms: 12, detail: 'fine' },
  });
  const key = (i: number, over: Partial<ApiKey> = {}): ApiKey => ({
    id: `key_${i}`,
    name: `Key ${i}`,
    scopes: ['incidents:read'],
    created_at: '2026-11-22T10:00:00.000Z',
    expires_at: null,
    last_used_at: null,
    revoked_at: null,
    created_by: { type: 'system', id: 'cli', name: 'cli' },
    ...over,
  });
  const now = new Date('2026-11-23T00:00:00.000Z');

  it('shows no admin parts without admin data', () => {
    const v = homeView({ incidents: [incident()], moreIncidents: false, admin: null, now });
    expect(textOf_(v)).toContain(incident().id);
    expect(textOf_(v)).not.toMatch(/connection_test|api_key_/);
  });

  it('gives admins Test buttons and Revoke for active keys only, within 100 blocks', () => {
    const incidents = Array.from({ length: 15 }, (_, i) => incident({ id: `inc_${i}` }));
    const v = homeView({
      incidents,
      moreIncidents: true,
      admin: {
        connections: Array.from({ length: 12 }, (_, i) => conn(i)),
        moreConnections: true,
        keys: [
          key(1),
          key(2, { revoked_at: '2026-11-22T11:00:00.000Z' }),
          ...Array.from({ length: 10 }, (_, i) => key(i + 3)),
        ],
        moreKeys: true,
      },
      now,
    });
    expect(v.blocks.length).toBeLessThanOrEqual(100);
    const accessories = (v.blocks as any[])
      .filter((b) => b.accessory)
      .map((b) => [b.accessory.action_id, b.accessory.value]);
    expect(accessories.filter(([a]) => a === 'connection_test')).toHaveLength(12);
    const revokes = accessories.filter(([a]) => a === 'api_key_revoke').map(([, v2]) => v2);
    expect(revokes).toContain('key_1');
    expect(revokes).not.toContain('key_2');
    expect(textOf_(v)).toContain('Generate API key');
  });

  it('offers every scope when generating a key, and shows the token once', () => {
    const m = generateApiKeyModal();
    expect(inputIds(m)).toEqual(['name', 'scopes', 'expires_in']);
    expect(inputs(m)[1].element.options.map((o: any) => o.value)).toEqual(['*', ...SCOPES]);
    // Slack's checkboxes element holds at most 10 options; past that the scopes are a multi-select.
    const scopes = inputs(m)[1].element;
    expect(scopes.type).toBe(scopes.options.length <= 10 ? 'checkboxes' : 'multi_static_select');
    const shown = apiKeyCreatedModal({ id: 'key_1', name: '<b>', token: 'hld_x' });
    expect(shown.submit).toBeUndefined();
    expect(textOf_(shown)).toContain('hld_x');
    expect(textOf_(shown)).not.toContain('<b>');
  });
});

describe('help and list', () => {
  it('help names every sub-command', () => {
    const h = JSON.stringify(helpMessage().blocks);
    for (const s of ['new', 'list', 'show', 'execute', 'update', 'resolve', 'close', 'help'])
      expect(h).toContain(`/incident ${s}`);
  });

  it('list: a line per incident, or a sunny note', () => {
    expect(incidentListMessage([], false).text).toBe('No open incidents.');
    const m = incidentListMessage([incident(), incident({ id: 'inc_2' })], true);
    expect(m.blocks.length).toBeLessThanOrEqual(50);
    expect(textOf_(m.blocks)).toContain('inc_2');
  });
});

describe('escaping and Slack size limits in every view', () => {
  /** Every mrkdwn/plain text a view carries, with the block it sits in. */
  const texts = (blocks: any[]): string[] => {
    const out: string[] = [];
    const walk = (v: unknown) => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === 'object') {
        const o = v as Record<string, unknown>;
        if ((o.type === 'mrkdwn' || o.type === 'plain_text') && typeof o.text === 'string') out.push(o.text);
        Object.values(o).forEach(walk);
      }
    };
    walk(blocks);
    return out;
  };
  const sectionTexts = (blocks: any[]) =>
    blocks.filter((b) => b.type === 'section' && b.text).map((b) => b.text.text as string);

  it('escapes the announcement’s notification text, which Slack parses for mentions', () => {
    const m = announcementMessage(incident({ title: '<!channel> <@U123> checkout' }), null);
    expect(m.text).not.toMatch(/<!channel>|<@U123>/);
    expect(m.text).toContain('&lt;!channel&gt;');
  });

  it('keeps every section within 3,000 characters when escaping lengthens long text', () => {
    // `<` becomes `&lt;` and `*` becomes ZWSP*ZWSP: 1,200 typed characters would show as 4,800.
    const i = incident({
      title: '<'.repeat(200),
      impact: '<'.repeat(9000),
      description: '*'.repeat(9000),
      resolution_summary: '&'.repeat(9000),
    });
    for (const blocks of [
      announcementMessage(i, null).blocks,
      closeIncidentModal(i).blocks,
      homeView({ incidents: [i], moreIncidents: false, admin: null, now: new Date() }).blocks,
    ]) {
      for (const t of sectionTexts(blocks as any[])) expect(t.length).toBeLessThanOrEqual(3000);
    }
    const impact = sectionTexts(announcementMessage(i, null).blocks as any[]).find((t) => t.startsWith('*Impact*'))!;
    // Cut after escaping, never inside an entity.
    expect(impact).toMatch(/^\*Impact\*\n(&lt;)+…$/);
  });

  it('escapes connection and template names in the execute preview', () => {
    const v = executeModal({
      incident: incident(),
      variables: [],
      previews: [
        {
          connectionName: '<!here> *ops*',
          connectionType: 'slack',
          templateName: '<@U1> notice',
          subject: '',
          body: 'b',
        },
      ],
    });
    const all = texts(v.blocks as any[]).join('\n');
    expect(all).not.toMatch(/<!here>|<@U1>/);
    expect(all).toContain('&lt;!here&gt;');
  });

  it('fits receipts into one section with whole lines and says how many are left out', () => {
    const lines = Array.from({ length: 40 }, (_, n) => ({
      connectionName: `<${'x'.repeat(99)}> ${n}`,
      connectionType: 'webhook',
      status: 'failed' as const,
      attempts: 8,
      error: '<'.repeat(100),
    }));
    const m = announcementMessage(incident(), { executionId: 'exe_1', status: 'failed', lines });
    const receipts = (m.blocks.find((b: any) => b.block_id === 'receipts') as any).text.text as string;
    expect(receipts.length).toBeLessThanOrEqual(3000);
    const shown = receipts.split('\n').filter((l) => l.includes('failed —')).length;
    expect(shown).toBeGreaterThan(0);
    expect(receipts).toMatch(new RegExp(`…and ${40 - shown} more$`));
  });

  it('keeps a revoke confirmation within Slack’s 300 characters for any key name', () => {
    const v = homeView({
      incidents: [],
      moreIncidents: false,
      admin: {
        connections: [],
        moreConnections: false,
        keys: [
          {
            id: 'key_1',
            name: '<'.repeat(100),
            scopes: ['*'],
            created_at: '2026-11-22T10:00:00.000Z',
            expires_at: null,
            last_used_at: null,
            revoked_at: null,
            created_by: { type: 'system', id: 's', name: 's' },
          },
        ],
        moreKeys: false,
      },
      now: new Date('2026-11-22T11:00:00.000Z'),
    });
    const confirm = (v.blocks as any[]).find((b) => b.accessory?.confirm)?.accessory.confirm;
    expect(confirm.text.text.length).toBeLessThanOrEqual(300);
    expect(confirm.text.text).not.toContain('<<');
  });

  it('escapes what a service message quotes back in an ephemeral line', () => {
    const line = ephemeralMessage(new DomainError('not_found', 'Incident <!channel> was not found.'));
    expect(line).not.toContain('<!channel>');
    expect(line).toContain('&lt;!channel&gt;');
    // Field errors under modal inputs are plain text: left as the service wrote them.
    expect(
      modalErrors(
        new DomainError('validation_failed', 'Bad.', [
          { field: 'title', code: 'too_long', message: 'Use < 200 chars.' },
        ]),
        ['title'],
        'title',
      ).title,
    ).toBe('Use < 200 chars.');
  });
});

describe('templates in the incident modals', () => {
  const newest = Array.from({ length: 100 }, (_, n) => ({ id: `tpl_new${n}`, name: `New ${n}` }));
  const old = { id: 'tpl_old', name: 'Old notice' };

  it('always offers and selects the attached templates, even when older than the newest 100', () => {
    const v = updateIncidentModal({
      incident: incident({ template_ids: ['tpl_old'] }),
      templates: { newest, more: false },
      attached: [old],
    });
    const el = inputs(v).find((b) => b.block_id === 'template_ids').element;
    expect(el.type).toBe('multi_static_select');
    expect(el.options).toHaveLength(100);
    expect(el.options.map((o: any) => o.value)).toContain('tpl_old');
    expect(el.initial_options.map((o: any) => o.value)).toEqual(['tpl_old']);
  });

  it('searches instead of listing once there are more than 100 templates', () => {
    const v = updateIncidentModal({
      incident: incident({ template_ids: ['tpl_old'] }),
      templates: { newest, more: true },
      attached: [old],
    });
    const el = inputs(v).find((b) => b.block_id === 'template_ids').element;
    expect(el).toMatchObject({ type: 'multi_external_select', min_query_length: 0, max_selected_items: 20 });
    expect(el.options).toBeUndefined();
    expect(el.initial_options.map((o: any) => o.value)).toEqual(['tpl_old']);
    const create = createIncidentModal({ templates: { newest, more: true }, ctx: {} });
    expect(inputs(create).find((b) => b.block_id === 'template_ids').element.type).toBe('multi_external_select');
  });
});
