import type { StatusLocale } from '../i18n.js';

/**
 * The words of the subscription pages (routes.ts, pages.ts), apart from the page's own strings
 * (src/status/locales/) so the page's cached renders do not carry them. `{name}` placeholders are
 * filled by i18n.ts's `fill`.
 */
const en = {
  back_home: 'Back to the status page',
  subscribe_again: 'Subscribe again on the status page',
  inbox_title: 'Check your inbox',
  inbox_body:
    'If this address can receive mail from us, a message with a link to confirm the subscription is on its way. The link works for 48 hours.',
  inbox_webhook_title: 'Challenge on its way',
  inbox_webhook_body:
    'If this URL can receive webhooks, it gets a challenge in a moment. Answer it with the challenge to confirm the subscription.',
  accepted_message: 'If the address can receive it, a confirmation message is on its way.',
  accepted_webhook_message: 'If the URL can receive it, a challenge is on its way.',
  confirm_title: 'Confirm your subscription',
  confirm_body: 'Press the button to receive updates from {title}.',
  confirm_button: 'Confirm subscription',
  confirmed_title: 'You are subscribed',
  confirmed_body: 'You will be told of updates from {title}.',
  already_title: 'You are subscribed',
  already_body: 'This subscription was confirmed already.',
  manage_link: 'Choose components or language',
  expired_title: 'This link has expired or was used',
  expired_body: 'Confirmation links work once, for 48 hours. Subscribe again to get a new one.',
  invalid_title: 'This link is no longer valid',
  invalid_body: 'It may be from an older subscription. Subscribe again on the status page.',
  manage_title: 'Manage your subscription',
  manage_for: 'Subscription of {address}',
  manage_pending: 'This subscription is not confirmed yet.',
  components_legend: 'Components',
  components_hint: 'Choose none to hear about every component.',
  locale_label: 'Language',
  save_button: 'Save',
  saved: 'Your choices are saved.',
  unsubscribe_button: 'Unsubscribe',
  unsubscribe_title: 'Unsubscribe {address}?',
  unsubscribe_body: 'You will no longer receive updates from {title}.',
  unsubscribed_title: 'You are unsubscribed',
  unsubscribed_body: 'You will receive no more updates from {title}.',
  throttled_title: 'Too many requests',
  throttled_body: 'Please try again in {minutes} minutes.',
  email_off_title: 'E-mail subscriptions are not available',
  email_off_body: 'This status page does not send e-mail. Its feeds tell of every update.',
  invalid_request_title: 'The request could not be used',
  error_invalid_email: 'Enter a valid e-mail address.',
  error_address_required: 'Enter an e-mail address.',
  error_unknown_component: 'A chosen component is not on the page any more.',
  error_url: 'The webhook URL must be a public https address.',
  error_other: 'Something in the form was not valid.',
  not_set_up_title: 'No status page',
  not_set_up_body: 'The status page is not set up.',
  unavailable_title: 'Temporarily unavailable',
  unavailable_body: 'Please try again in a moment.',
};

export type SubscriptionStrings = typeof en;

const de: SubscriptionStrings = {
  back_home: 'Zurück zur Statusseite',
  subscribe_again: 'Auf der Statusseite erneut abonnieren',
  inbox_title: 'Bitte sehen Sie in Ihr Postfach',
  inbox_body:
    'Wenn diese Adresse E-Mails von uns empfangen kann, ist eine Nachricht mit einem Bestätigungslink unterwegs. Der Link ist 48 Stunden gültig.',
  inbox_webhook_title: 'Challenge unterwegs',
  inbox_webhook_body:
    'Wenn diese URL Webhooks empfangen kann, erhält sie gleich eine Challenge. Beantworten Sie sie mit der Challenge, um das Abonnement zu bestätigen.',
  accepted_message: 'Wenn die Adresse sie empfangen kann, ist eine Bestätigungsnachricht unterwegs.',
  accepted_webhook_message: 'Wenn die URL sie empfangen kann, ist eine Challenge unterwegs.',
  confirm_title: 'Abonnement bestätigen',
  confirm_body: 'Drücken Sie die Schaltfläche, um Updates von {title} zu erhalten.',
  confirm_button: 'Abonnement bestätigen',
  confirmed_title: 'Sie haben abonniert',
  confirmed_body: 'Sie werden über Updates von {title} informiert.',
  already_title: 'Sie haben abonniert',
  already_body: 'Dieses Abonnement war bereits bestätigt.',
  manage_link: 'Komponenten oder Sprache wählen',
  expired_title: 'Dieser Link ist abgelaufen oder wurde verwendet',
  expired_body:
    'Bestätigungslinks funktionieren einmal und 48 Stunden lang. Abonnieren Sie erneut, um einen neuen zu erhalten.',
  invalid_title: 'Dieser Link ist nicht mehr gültig',
  invalid_body: 'Er stammt vielleicht von einem älteren Abonnement. Abonnieren Sie erneut auf der Statusseite.',
  manage_title: 'Abonnement verwalten',
  manage_for: 'Abonnement von {address}',
  manage_pending: 'Dieses Abonnement ist noch nicht bestätigt.',
  components_legend: 'Komponenten',
  components_hint: 'Wählen Sie keine, um über alle Komponenten informiert zu werden.',
  locale_label: 'Sprache',
  save_button: 'Speichern',
  saved: 'Ihre Auswahl ist gespeichert.',
  unsubscribe_button: 'Abbestellen',
  unsubscribe_title: '{address} abbestellen?',
  unsubscribe_body: 'Sie erhalten dann keine Updates von {title} mehr.',
  unsubscribed_title: 'Sie haben abbestellt',
  unsubscribed_body: 'Sie erhalten keine Updates von {title} mehr.',
  throttled_title: 'Zu viele Anfragen',
  throttled_body: 'Bitte versuchen Sie es in {minutes} Minuten erneut.',
  email_off_title: 'E-Mail-Abonnements sind nicht verfügbar',
  email_off_body: 'Diese Statusseite versendet keine E-Mails. Ihre Feeds melden jedes Update.',
  invalid_request_title: 'Die Anfrage konnte nicht verwendet werden',
  error_invalid_email: 'Geben Sie eine gültige E-Mail-Adresse ein.',
  error_address_required: 'Geben Sie eine E-Mail-Adresse ein.',
  error_unknown_component: 'Eine gewählte Komponente ist nicht mehr auf der Seite.',
  error_url: 'Die Webhook-URL muss eine öffentliche https-Adresse sein.',
  error_other: 'Etwas im Formular war nicht gültig.',
  not_set_up_title: 'Keine Statusseite',
  not_set_up_body: 'Die Statusseite ist nicht eingerichtet.',
  unavailable_title: 'Vorübergehend nicht verfügbar',
  unavailable_body: 'Bitte versuchen Sie es gleich noch einmal.',
};

const STRINGS: Record<StatusLocale, SubscriptionStrings> = { en, de };

export function subscriptionStrings(locale: StatusLocale): SubscriptionStrings {
  return STRINGS[locale];
}
