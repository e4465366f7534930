# Sourced by the image builders (scripts/setup-host.sh, cpu-engine/image/build-image.sh).
# publish_image RECIPE_IMAGE IMAGE [LABEL]: RECIPE_IMAGE (tagged by a hash of its inputs)
# is published under its public name IMAGE, both pushed to the loopback registry, so the
# next run finds the recipe tag and skips the build. Only the public tag is kept locally,
# so removing it really removes the image; with LABEL, earlier builds left dangling by the
# retag are pruned.
publish_image() {
  local recipe_image=$1 image=$2 label=${3:-}
  docker tag "$recipe_image" "$image"
  docker push -q "$recipe_image" >/dev/null
  docker push -q "$image" >/dev/null
  docker rmi "$recipe_image" >/dev/null
  if [[ -n $label ]]; then docker image prune -f --filter "label=$label" >/dev/null; fi
}
