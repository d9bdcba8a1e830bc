"""Job.uid (never reused: names the job's directories), Job.start_failures, Node.worker_drained,
InstanceLease (one live console / node worker per role)."""

import uuid

from django.db import migrations, models


def fill_uids(apps, schema_editor):
    Job = apps.get_model("scheduler", "Job")
    for job in Job.objects.only("pk").iterator():
        Job.objects.filter(pk=job.pk).update(uid=uuid.uuid4())


class Migration(migrations.Migration):

    dependencies = [
        ("scheduler", "0006_reason_codes"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="uid",
            field=models.UUIDField(null=True, editable=False),
        ),
        migrations.RunPython(fill_uids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="job",
            name="uid",
            field=models.UUIDField(default=uuid.uuid4, unique=True, editable=False),
        ),
        migrations.AddField(
            model_name="job",
            name="start_failures",
            field=models.PositiveIntegerField(
                default=0, help_text="Attempts requeued because a pod never started (no restart used)."
            ),
        ),
        migrations.AddField(
            model_name="node",
            name="worker_drained",
            field=models.BooleanField(
                default=False, help_text="Cordoned by its own worker's drain: re-registering uncordons it."
            ),
        ),
        migrations.CreateModel(
            name="InstanceLease",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("role", models.CharField(max_length=100, unique=True)),
                ("owner", models.CharField(max_length=200)),
                ("expires_at", models.DateTimeField()),
                ("renewed_at", models.DateTimeField()),
            ],
        ),
    ]
