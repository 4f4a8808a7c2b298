// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** The layer rules: what each folder may never import (dependencies point inward). */
const layer = (files, patterns) => ({
  files,
  rules: { 'no-restricted-imports': ['error', { patterns }] },
});
/** The I/O half of the channel modules, reached only through the registry's lazy `adapter()`. */
const channelIo = ['**/channels/*/send*', '**/common/http-outcome*'];
/** The delivery machinery above the channels (all of src/delivery/ but the outbound client). */
const deliveryMachinery = [
  '**/delivery/senders*',
  '**/delivery/connection-tester*',
  '**/delivery/queue*',
  '**/delivery/worker*',
  '**/delivery/metrics*',
  '**/delivery/reminder-loop*',
];
const io = [
  'ioredis',
  'bullmq',
  'express',
  '@slack/*',
  'nodemailer',
  'pino',
  'node:fs*',
  'node:net',
  'node:http*',
  'node:dns*',
];

export default tseslint.config(
  { ignores: ['node_modules/**', 'data/**', 'coverage/**', 'manifest/**', 'dist/**', '.ab/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  // A function a reader cannot hold in one screen gets split, or says why it may not be
  // (`// eslint-disable-next-line max-lines-per-function -- <reason>`). Tests are tables of cases.
  // 80 lines: the formatter lays calls out one argument per line, so a screen holds fewer statements.
  {
    files: ['src/**'],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }] },
  },
  // The channel contract (src/contracts/) is the bottom layer: everyone may import it, and it
  // imports nothing above it — no layer of Herald but a domain/common leaf, and of an I/O
  // library only types — even as a type, so no import circle can pass through it.
  {
    files: ['src/contracts/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                // (domain/common holds leaves the contract may use, e.g. DomainError)
                '**/domain/connection/**',
                '**/domain/execution/**',
                '**/domain/incident/**',
                '**/domain/template/**',
                '**/channels/**',
                '**/ports*',
                '**/delivery/**',
                '**/services/**',
                '**/store/**',
                '**/http/**',
                '**/slack/**',
                '**/cli/**',
                '**/runtime/**',
                '**/app.js',
                '**/composition/**',
                '**/config*',
              ],
              message: 'the contract is the bottom layer: it imports nothing above it (types neither)',
            },
            { group: io, allowTypeImports: true, message: 'the contract names I/O libraries by type only' },
          ],
        },
      ],
    },
  },
  layer(
    ['src/domain/**'],
    [
      {
        group: [
          ...io,
          '**/services/**',
          '**/store/**',
          '**/delivery/**',
          '**/http/**',
          '**/slack/**',
          '**/cli/**',
          '**/ports*',
          '**/app.js',
          '**/composition/**',
          '**/config*',
          '**/channels/channel*',
          ...channelIo,
        ],
        message: 'domain is pure: no I/O and no outer layers (channel types come from src/contracts/)',
      },
    ],
  ),
  // A channel module's pure half (config, escape, index) is read by the domain: it follows the
  // domain's rules, types included (what it shares with the I/O half is in src/contracts/).
  {
    files: ['src/channels/**'],
    ignores: ['src/channels/*/send.ts', 'src/channels/common/http-outcome.ts'],
    // (Relative patterns for the Slack edge and the app config: src/channels/slack/ and each
    // type's config.ts share their names.)
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                ...io,
                '**/services/**',
                '**/store/**',
                '**/delivery/**',
                '**/http/**',
                '../../slack/**',
                '**/cli/**',
                '**/ports*',
                '**/app.js',
                '**/composition/**',
                '../config*',
                '../../config*',
                ...channelIo,
              ],
              message: "a channel's pure half: no I/O (send.ts is loaded through adapter())",
            },
          ],
        },
      ],
    },
  },
  layer(
    ['src/channels/*/send.ts', 'src/channels/common/http-outcome.ts'],
    [
      {
        group: [
          '**/services/**',
          '**/store/**',
          '**/http/**',
          '**/slack/**',
          '**/cli/**',
          '**/app.js',
          '**/composition/**',
          '**/ports*',
          ...deliveryMachinery,
        ],
        message:
          'a sender is an adapter below the ports: it never imports services, edges, ports or the delivery machinery (src/contracts/ has what it shares)',
      },
    ],
  ),
  layer(
    ['src/services/**'],
    [
      {
        group: [
          ...io,
          ...channelIo,
          '**/store/**',
          '**/delivery/**',
          '**/http/**',
          '**/slack/**',
          '**/cli/**',
          '**/app.js',
          '**/composition/**',
        ],
        message: 'services see the world only through src/ports/',
      },
    ],
  ),
  layer(
    ['src/store/**', 'src/delivery/**'],
    [
      {
        group: ['**/services/**', '**/http/**', '**/slack/**', '**/cli/**', '**/app.js', '**/composition/**'],
        message: 'adapters never import services or edges',
      },
    ],
  ),
  layer(
    ['src/http/**'],
    [
      {
        group: ['ioredis', 'bullmq', '**/store/**', '**/delivery/**', '**/slack/**', '**/cli/**'],
        message: 'http talks to services and domain only',
      },
    ],
  ),
  layer(
    ['src/slack/**'],
    [
      {
        group: ['ioredis', 'bullmq', '**/store/**', '**/delivery/**', '**/http/**', '**/cli/**'],
        message: 'slack talks to services and domain only',
      },
    ],
  ),
  layer(
    ['src/cli/**'],
    [
      {
        group: ['ioredis', 'bullmq', '**/store/**', '**/delivery/**', '**/http/**', '**/slack/**'],
        message: 'cli talks to services and domain only',
      },
    ],
  ),
  {
    files: ['test/**', 'bench/**'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-base-to-string': 'off',
    },
  },
  { files: ['eslint.config.js'], ...tseslint.configs.disableTypeChecked },
  // Plain Node scripts (no TypeScript project): the JavaScript rules only.
  {
    files: ['scripts/**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { parserOptions: { projectService: false }, globals: { process: 'readonly', Buffer: 'readonly' } },
  },
);
