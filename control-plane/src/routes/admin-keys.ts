// Key administration for the caller's own org (admin:write): create, list, rotate, revoke.
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { toRfc3339 } from '@svc/shared';
import { DEFAULT_OVERLAP_SECONDS, MAX_OVERLAP_SECONDS, type KeyService } from '../keys/key-service.js';
import { SCOPES } from '../keys/scopes.js';
import { ListOf, StringEnum, responses } from '../http/schemas.js';
import { KeyView, keyView } from './views.js';

const KeyIdParams = Type.Object({ key_id: Type.String({ minLength: 1, maxLength: 64 }) });

const KeyWithValue = Type.Intersect([
  Type.Ref(KeyView),
  Type.Object({
    key: Type.Union([Type.String(), Type.Null()], {
      description: 'The key value. Shown only in this response; null in an idempotent replay, which never holds it.',
    }),
    key_redacted: Type.Optional(Type.Literal(true, { description: 'Present in an idempotent replay: the value was shown in the first answer only.' })),
  }),
]);

export function adminKeyRoutes(keys: KeyService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.addSchema(KeyView);
    const config = { scope: 'admin:write' as const };
    // Answers that show a key value: an idempotent replay withholds it.
    const showsKey = { ...config, secretFields: ['key'] };
    const tags = ['keys'];

    app.post(
      '/admin/keys',
      {
        config: showsKey,
        schema: {
          tags,
          operationId: 'createKey',
          summary: 'Create an API key in your organization; the value is shown once',
          body: Type.Object(
            {
              name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
              kind: Type.Optional(StringEnum(['live', 'test', 'public'] as const, { default: 'live' })),
              scopes: Type.Optional(Type.Array(StringEnum(SCOPES), { minItems: 1, maxItems: SCOPES.length })),
              admin: Type.Optional(Type.Boolean({ default: false })),
              user_id: Type.Optional(
                Type.String({
                  minLength: 1,
                  maxLength: 64,
                  description:
                    "The org user who owns the key: scopes must be within the user's role, and removing the user revokes the key. A key that belongs to a user makes keys for that user only (the default when omitted); a key of the organization itself makes the organization's keys (user_id null) when it is omitted",
                }),
              ),
            },
            { additionalProperties: false },
          ),
          response: responses({ 201: KeyWithValue }),
        },
      },
      async (request, reply) => {
        const { name, kind, scopes, admin, user_id } = request.body;
        const { org, key } = request.principal!;
        const created = await keys.create({ orgId: org.id, name: name ?? null, kind, scopes, admin, userId: user_id, caller: key });
        return reply.code(201).send({ ...keyView(created.record), key: created.value });
      },
    );

    app.get(
      '/admin/keys',
      { config, schema: { tags, operationId: 'listKeys', summary: 'List the keys of your organization (prefix and last 4 only)', response: responses({ 200: ListOf(Type.Ref(KeyView)) }) } },
      async (request) => ({ object: 'list' as const, data: (await keys.list(request.principal!.org.id)).map(keyView) }),
    );

    app.post(
      '/admin/keys/:key_id/rotate',
      {
        config: showsKey,
        schema: {
          tags,
          operationId: 'rotateKey',
          summary: 'Issue a new value; the old one keeps working for overlap_seconds (default 86400)',
          params: KeyIdParams,
          body: Type.Object(
            {
              overlap_seconds: Type.Optional(
                Type.Integer({ minimum: 0, maximum: MAX_OVERLAP_SECONDS, default: DEFAULT_OVERLAP_SECONDS }),
              ),
            },
            { additionalProperties: false },
          ),
          response: responses({
            200: Type.Intersect([KeyWithValue, Type.Object({ old_key_expires_at: Type.String() })]),
          }),
        },
      },
      async (request) => {
        const { org, key } = request.principal!;
        const rotated = await keys.rotate(request.params.key_id, request.body.overlap_seconds, org.id, key);
        return { ...keyView(rotated.record), key: rotated.value, old_key_expires_at: toRfc3339(rotated.oldKeyExpiresAt) };
      },
    );

    app.post(
      '/admin/keys/:key_id/revoke',
      {
        config,
        schema: {
          tags,
          operationId: 'revokeKey',
          summary: 'Revoke a key at once; repeated calls answer 200',
          params: KeyIdParams,
          body: Type.Object({}, { additionalProperties: false }),
          response: responses({
            200: Type.Object({ key_id: Type.String(), object: Type.Literal('api_key.revocation'), revoked: Type.Literal(true), revoked_at: Type.String() }),
          }),
        },
      },
      async (request) => {
        const key = await keys.revoke(request.params.key_id, request.principal!.org.id);
        return { key_id: key.id, object: 'api_key.revocation' as const, revoked: true as const, revoked_at: toRfc3339(key.revokedAt!) };
      },
    );
  };
}
