import { neutraliseMentions } from '../common/escape.js';

/** Telegram parse modes a connection may use; absent means plain text. */
export type TelegramParseMode = 'HTML' | 'MarkdownV2' | 'Markdown';

/**
 * Telegram: plain text needs no escaping (only mentions are neutralised); HTML mode takes
 * entities; MarkdownV2 and legacy Markdown take a backslash before their reserved characters
 * (https://core.telegram.org/bots/api#formatting-options).
 */
export function escapeTelegram(value: string, mode: TelegramParseMode | null): string {
  switch (mode) {
    case null:
      return neutraliseMentions(value);
    case 'HTML':
      return neutraliseMentions(value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;'));
    case 'MarkdownV2':
      return neutraliseMentions(value.replace(/[_*[\]()~`>#+\-=|{}.!\\]/g, '\\$&'));
    case 'Markdown':
      return neutraliseMentions(value.replace(/[_*`[]/g, '\\$&'));
  }
}
