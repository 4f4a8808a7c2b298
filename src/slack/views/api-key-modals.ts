import { SCOPES } from '../../domain/common/api-key.js';
import { escapeSlack } from '../../channels/slack/escape.js';
import { LIMITS } from '../../domain/common/limits.js';
import { CALLBACKS } from './action-ids.js';
import { context, input, INPUT_ACTION, modal, option, plain, section, textInput, type ModalView } from './block-kit.js';

/** Slack's checkboxes element holds at most 10 options. */
const MAX_CHECKBOXES = 10;

/** Expiry choices, as the `expires_in` durations the API key service takes (absent = never). */
export const EXPIRY_CHOICES: readonly { label: string; value: string }[] = [
  { label: 'Never', value: 'never' },
  { label: '30 days', value: '30d' },
  { label: '90 days', value: '90d' },
  { label: '1 year', value: '365d' },
];

export function generateApiKeyModal(): ModalView {
  const scopeOptions = [option('All scopes (*)', '*'), ...SCOPES.map((s) => option(s, s))];
  const expiry = EXPIRY_CHOICES.map((c) => option(c.label, c.value));
  return modal({
    callbackId: CALLBACKS.apiKeyGenerate,
    title: 'Generate API key',
    submit: 'Generate',
    blocks: [
      input('name', 'Name', textInput({ maxLength: LIMITS.keyName, placeholder: 'deploy-bot' }), {
        hint: 'Who or what uses this key.',
      }),
      // Slack's checkboxes hold 10 options; with more scopes than that the choice is a multi-select.
      input(
        'scopes',
        'Scopes',
        scopeOptions.length <= MAX_CHECKBOXES
          ? { type: 'checkboxes', action_id: INPUT_ACTION, options: scopeOptions }
          : {
              type: 'multi_static_select',
              action_id: INPUT_ACTION,
              options: scopeOptions,
              placeholder: plain('Pick scopes', 150),
            },
      ),
      input(
        'expires_in',
        'Expires',
        { type: 'static_select', action_id: INPUT_ACTION, options: expiry, initial_option: expiry[0]! },
        { optional: true },
      ),
    ],
  });
}

/** Shown once, in place of the form: the token is never stored and cannot be shown again. */
export function apiKeyCreatedModal(p: { id: string; name: string; token: string }): ModalView {
  return modal({
    callbackId: 'api_key_created',
    title: 'API key created',
    close: 'Done',
    blocks: [
      section(
        `:key: *${escapeSlack(p.name)}* (\`${p.id}\`)\nCopy the token now: Herald keeps only its hash and will never show it again.`,
      ),
      section(`\`${p.token}\``, 'token'),
      context('Use it as `Authorization: Bearer <token>`. Revoke it from this tab at any time.'),
    ],
  });
}
