import { describe, expect, it } from 'vitest';
import { ChannelTypeSchema, CHANNEL_TYPES } from '../../src/channels/index.js';
import {
  applyTemplatePatch,
  newTemplate,
  TemplateBulkCreateSchema,
  TemplateCreateSchema,
  templateNameKey,
  TemplatePatchSchema,
  type Template,
} from '../../src/domain/template/template.js';
import { presentTemplate } from '../../src/http/presenters/template.js';
import { analyzePlaceholders, deriveVariables } from '../../src/domain/template/template-placeholders.js';
import { parseInput } from '../../src/domain/common/validation.js';
import { missingVariablesError, resolveVariables, VariablesSchema } from '../../src/domain/template/variables.js';
import { domainErrorOf } from '../support/domain-error.js';

const NOW = '2026-11-22T10:00:00.000Z';
const create = (input: Record<string, unknown>): Template =>
  newTemplate('tpl_1', parseInput(TemplateCreateSchema, { name: 'T', ...input }), NOW);

const fail = domainErrorOf;

describe('channel types', () => {
  it('lists the nine channel types', () => {
    expect(CHANNEL_TYPES).toEqual([
      'slack',
      'teams',
      'discord',
      'email',
      'mattermost',
      'google_chat',
      'telegram',
      'webhook',
      'status_page',
    ]);
    expect(ChannelTypeSchema.safeParse('sms').success).toBe(false);
  });
});

describe('variable derivation', () => {
  it('section-only and self-guarded names are optional, others required, built-ins are never variables', () => {
    const t = create({
      subject: '{{incident.title}} {{area}}',
      body: '{{#eta}}ETA {{eta}}{{/eta}}{{^notes}}none{{/notes}} {{owner}} {{execution.id}} {{#incident.impact}}{{incident.impact}}{{/incident.impact}}',
      variants: { slack: { body: '{{#owner}}{{owner}}{{/owner}} {{#links}}{{.}}{{/links}}' } },
    });
    expect(t.variables).toEqual([
      { name: 'area', description: '', required: true, default: null },
      { name: 'eta', description: '', required: false, default: null },
      { name: 'notes', description: '', required: false, default: null },
      { name: 'owner', description: '', required: true, default: null },
      { name: 'links', description: '', required: false, default: null },
    ]);
    expect(t.variables_declared).toBe(false);
  });

  it('a value inside a section of another name is still required', () => {
    expect(deriveVariables(analyzePlaceholders([{ field: 'body', text: '{{#a}}{{b}}{{/a}}' }]).uses)).toEqual([
      { name: 'a', description: '', required: false, default: null },
      { name: 'b', description: '', required: true, default: null },
    ]);
  });

  it('derives at most 50 variables, the cap a caller can supply (more is 422 on variables)', () => {
    const text = (n: number) => Array.from({ length: n }, (_, i) => `{{v${i}}}`).join(' ');
    expect(create({ body: text(50) }).variables).toHaveLength(50);
    const e = fail(() => create({ body: text(51) }));
    expect(e.code).toBe('validation_failed');
    expect(e.errors).toEqual([expect.objectContaining({ field: 'variables', code: 'too_many' })]);
  });
});

describe('declared variables', () => {
  it('a placeholder neither declared nor built-in is undeclared_variable, pointing at where it is used', () => {
    const e = fail(() =>
      create({
        subject: '{{eta}}',
        body: '{{eta}} {{incident.title}}',
        variables: [{ name: 'area' }],
        variants: { slack: { body: '{{eta}} {{eta}} {{owner}}' } },
      }),
    );
    expect(e.code).toBe('undeclared_variable');
    expect(e.errors.map((x) => x.field)).toEqual(['subject', 'body', 'variants.slack.body', 'variants.slack.body']);
    expect(e.errors.every((x) => x.code === 'undeclared_variable')).toBe(true);
  });

  it('declared variables are kept as given, with defaults filled', () => {
    const t = create({
      body: '{{eta}}',
      variables: [{ name: 'eta', description: 'When', required: false, default: 'soon' }, { name: 'unused' }],
    });
    expect(t.variables).toEqual([
      { name: 'eta', description: 'When', required: false, default: 'soon' },
      { name: 'unused', description: '', required: true, default: null },
    ]);
    expect(t.variables_declared).toBe(true);
  });

  it('names follow the documented pattern, are unique, not reserved, and at most 50', () => {
    const bad = TemplateCreateSchema.safeParse({
      name: 'T',
      body: 'x',
      variables: [{ name: '1x' }, { name: 'ok' }, { name: 'ok' }, { name: 'incident' }, { name: 'a'.repeat(65) }],
    });
    expect(bad.success).toBe(false);
    const e = fail(() =>
      parseInput(TemplateCreateSchema, {
        name: 'T',
        body: 'x',
        variables: [{ name: '1x' }, { name: 'ok' }, { name: 'ok' }, { name: 'incident' }],
      }),
    );
    expect(e.errors.map((x) => x.field).sort()).toEqual(['variables.0.name', 'variables.2.name', 'variables.3.name']);
    const many = Array.from({ length: 51 }, (_, i) => ({ name: `v${i}` }));
    expect(
      fail(() => parseInput(TemplateCreateSchema, { name: 'T', body: 'x', variables: many })).errors[0],
    ).toMatchObject({ field: 'variables', code: 'too_many' });
  });
});

describe('placeholders that are refused', () => {
  it.each([
    ['{{{v}}}', 'unescaped_placeholder'],
    ['{{&v}}', 'unescaped_placeholder'],
    ['{{>partial}}', 'partial_not_allowed'],
    ['{{incident.secret}}', 'invalid_placeholder'],
    ['{{incident}}', 'invalid_placeholder'],
    ['{{#execution}}x{{/execution}}', 'invalid_placeholder'],
    ['{{foo.bar}}', 'invalid_placeholder'],
    ['{{.}}', 'invalid_placeholder'],
    ['{{#a}}', 'invalid_syntax'],
    ['{{/a}}', 'invalid_syntax'],
    ['{{a', 'invalid_syntax'],
  ])('%s → 422 %s with the field', (text, code) => {
    const e = fail(() => create({ body: 'ok', variants: { discord: { body: text } } }));
    expect(e.code).toBe('validation_failed');
    expect(e.errors).toEqual([expect.objectContaining({ field: 'variants.discord.body', code })]);
    expect(e.errors[0]?.message.length).toBeGreaterThan(10);
  });

  it('comments and delimiter changes are fine', () => {
    expect(create({ body: '{{! note }}{{=<% %>=}}<% eta %>' }).variables.map((v) => v.name)).toEqual(['eta']);
  });
});

describe('schemas', () => {
  it('create is strict and enforces the limits, one error per field', () => {
    const e = fail(() =>
      parseInput(TemplateCreateSchema, {
        name: 'n'.repeat(101),
        body: 'b'.repeat(20_001),
        subject: 's'.repeat(20_001),
        description: 'd'.repeat(10_001),
        variants: { sms: { body: 'x' }, slack: { body: '', colour: 1 } },
        colour: 'red',
      }),
    );
    expect(e.errors.map((x) => x.field).sort()).toEqual(
      [
        'body',
        'colour',
        'description',
        'name',
        'subject',
        'variants.slack.body',
        'variants.slack.colour',
        'variants.sms',
      ].sort(),
    );
  });

  it('body is required; bodies of exactly 20,000 characters are fine', () => {
    expect(fail(() => parseInput(TemplateCreateSchema, { name: 'x' })).errors).toEqual([
      expect.objectContaining({ field: 'body', code: 'required' }),
    ]);
    expect(TemplateCreateSchema.safeParse({ name: 'x', body: 'b'.repeat(20_000) }).success).toBe(true);
  });

  it('bulk: errors point at the item', () => {
    const e = fail(() =>
      parseInput(TemplateBulkCreateSchema, [
        { name: 'a', body: 'x' },
        { name: '', body: 'x' },
      ]),
    );
    expect(e.errors).toEqual([expect.objectContaining({ field: '1.name' })]);
    expect(TemplateBulkCreateSchema.safeParse([]).success).toBe(false);
    expect(
      TemplateBulkCreateSchema.safeParse(Array.from({ length: 101 }, (_, i) => ({ name: `t${i}`, body: 'x' }))).success,
    ).toBe(false);
  });

  it('connection_ids must not repeat', () => {
    expect(TemplateCreateSchema.safeParse({ name: 'x', body: 'b', connection_ids: ['con_1', 'con_1'] }).success).toBe(
      false,
    );
  });

  it('names clash case-insensitively', () => {
    expect(templateNameKey('Major Outage')).toBe(templateNameKey('major outage'));
    expect(templateNameKey('Ｏｕｔａｇｅ')).toBe(templateNameKey('outage'));
  });

  it('the wire shape has no storage fields and variant subjects are null, not absent', () => {
    const wire = presentTemplate(create({ body: 'x', variants: { email: { body: 'e' } } }));
    expect(wire).not.toHaveProperty('variables_declared');
    expect(wire.variants).toEqual({ email: { subject: null, body: 'e' } });
    expect(wire).toMatchObject({
      version: 1,
      created_at: NOW,
      updated_at: NOW,
      connection_ids: [],
      description: '',
      subject: '',
    });
  });
});

describe('applyTemplatePatch', () => {
  const patch = (t: Template, p: Record<string, unknown>) =>
    applyTemplatePatch(t, parseInput(TemplatePatchSchema, p), '2026-11-22T11:00:00.000Z');

  it('a change is a new version; a no-op is not', () => {
    const t = create({ body: 'x' });
    const next = patch(t, { body: 'y' });
    expect(next).toMatchObject({ version: 2, body: 'y', updated_at: '2026-11-22T11:00:00.000Z', created_at: NOW });
    expect(patch(next, { body: 'y' })).toBe(next);
  });

  it('an empty patch is 422', () => {
    expect(fail(() => patch(create({ body: 'x' }), {})).code).toBe('validation_failed');
  });

  it('derived variables are derived again; declared ones are kept and checked; null reverts to derived', () => {
    const derived = create({ body: '{{a}}' });
    expect(patch(derived, { body: '{{b}}' }).variables.map((v) => v.name)).toEqual(['b']);

    const declared = create({ body: '{{a}}', variables: [{ name: 'a', description: 'A' }] });
    const e = fail(() => patch(declared, { body: '{{a}} {{b}}' }));
    expect(e.code).toBe('undeclared_variable');
    expect(e.errors[0]?.field).toBe('body');
    expect(patch(declared, { subject: 'S {{a}}' }).variables).toEqual(declared.variables);

    const back = patch(declared, { variables: null, body: '{{#b}}{{b}}{{/b}}' });
    expect(back.variables_declared).toBe(false);
    expect(back.variables).toEqual([{ name: 'b', description: '', required: false, default: null }]);
  });

  it('variants are replaced as a whole', () => {
    const t = create({ body: 'x', variants: { slack: { body: 's' }, email: { body: 'e', subject: 'E' } } });
    expect(patch(t, { variants: { discord: { body: 'd' } } }).variants).toEqual({
      discord: { subject: null, body: 'd' },
    });
  });
});

describe('variables at render and execute', () => {
  const declared = [
    { name: 'eta', description: '', required: true, default: null },
    { name: 'area', description: '', required: true, default: 'everywhere' },
    { name: 'notes', description: '', required: false, default: null },
    { name: 'constructor', description: '', required: true, default: null },
  ];

  it('defaults fill blanks; required without value or default are missing', () => {
    expect(resolveVariables(declared, { eta: ' ', extra: 'x' })).toEqual({
      values: { eta: ' ', extra: 'x', area: 'everywhere', notes: '' },
      missing: ['eta', 'constructor'],
    });
    expect(resolveVariables(declared, { eta: '5m', area: 'EU', constructor: 'c' }).missing).toEqual([]);
  });

  it('missing_variables has one error per name', () => {
    const e = missingVariablesError(['eta', 'owner']);
    expect(e.code).toBe('missing_variables');
    expect(e.errors).toEqual([
      { field: 'variables.eta', code: 'required', message: expect.any(String) },
      { field: 'variables.owner', code: 'required', message: expect.any(String) },
    ]);
  });

  it('VariablesSchema: names, reserved names, value length, count', () => {
    expect(VariablesSchema.safeParse({ eta: 'x'.repeat(4000) }).success).toBe(true);
    const e = fail(() =>
      parseInput(VariablesSchema, { 'bad-name': 'x', incident: 'x', eta: 'x'.repeat(4001), n: 5 }, ['variables']),
    );
    expect(e.errors.map((x) => x.field).sort()).toEqual([
      'variables.bad-name',
      'variables.eta',
      'variables.incident',
      'variables.n',
    ]);
    const many = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`v${i}`, 'x']));
    expect(fail(() => parseInput(VariablesSchema, many, ['variables'])).errors[0]?.field).toBe('variables');
  });
});
